"""The webhook sink's own options: ``--webhook-<name>`` flags and ``RELAYD_WEBHOOK_<NAME>`` variables."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from relayd.security.material import Material, WatchedFile, pem_file, secret_lines_file, text_file
from relayd.security.material import secret_file as one_secret_file
from relayd.sinks.own_options import SECURITY, STRIPPED_WATCHED, content_of, option, watched


def _secrets_file(option: str, path: Path, values: dict[str, Any]) -> WatchedFile[tuple[str, ...]]:
    """The signing secrets, one a line: ``whsec_<base64>`` each under the standard scheme."""
    if values["signature"] == "standard":
        from relayd.sinks.webhook.standard_webhooks import parse_secret_lines  # only when signing

        return text_file(option, path, parse_secret_lines)
    return secret_lines_file(option, path)


def _headers_file(
    option: str, path: Path, _values: dict[str, Any]
) -> WatchedFile[tuple[tuple[str, str], ...]]:
    from relayd.sinks.webhook.http_policy import parse_header_lines  # only when the file is given

    return text_file(option, path, parse_header_lines)


class SigningKeys:
    """The HMAC keys of the current secrets of ``--webhook-secret-file``.

    Under the standard scheme a ``whsec_<base64>`` line's key is its decoded base64; under the
    relayd scheme a line's key is its UTF-8 bytes.
    """

    __slots__ = ("_decode", "_lines")

    def __init__(self, lines: Material[tuple[str, ...]], scheme: str) -> None:
        self._lines = lines
        self._decode: Callable[[str], bytes] = str.encode  # the relayd scheme: the line's bytes
        if scheme == "standard":
            from relayd.sinks.webhook.standard_webhooks import decode_secret  # only when signing

            self._decode = decode_secret

    @property
    def value(self) -> tuple[bytes, ...]:
        return tuple(self._decode(line) for line in self._lines.value)


def _keys(lines: Material[tuple[str, ...]], values: dict[str, Any]) -> SigningKeys:
    return SigningKeys(lines, values["signature"])


@dataclass(frozen=True, slots=True)
class WebhookOptions:
    """How the webhook sink signs, times, batches and secures its requests."""

    prefix: ClassVar[str] = "webhook"

    secret_file: Path | None = option(
        None,
        "File of webhook signing secrets, one a line, each signing every request: 'whsec_<base64>' "
        f"under --webhook-signature standard, any text under relayd ({STRIPPED_WATCHED}).",
        panel=SECURITY,
        reads=_secrets_file,
        secret=True,
    )
    timeout: float = option(10.0, "Seconds one webhook request may take.", constraints={"gt": 0, "le": 600})
    concurrency: int = option(
        16, "Most webhook requests in flight at once.", constraints={"ge": 1, "le": 10_000}
    )
    connect_timeout: float | None = option(
        None, "Seconds to open a webhook connection.", constraints={"gt": 0, "le": 600}
    )
    read_timeout: float | None = option(
        None, "Seconds a webhook answer may pause between reads.", constraints={"gt": 0, "le": 600}
    )
    headers_file: Path | None = option(
        None,
        "File of extra webhook headers, one 'Name: value' a line (re-read when it changes).",
        panel=SECURITY,
        reads=_headers_file,
        secret=True,
    )
    gzip: bool = option(False, "Gzip webhook request bodies.")
    signature: Literal["standard", "relayd"] = option(
        "standard",
        "Webhook signing scheme: standard (Standard Webhooks: webhook-id, webhook-timestamp, "
        "webhook-signature) or relayd (X-Relayd-Timestamp, X-Relayd-Signature).",
    )
    batch: int = option(
        1,
        "Most envelopes in one webhook request (1: one request per envelope).",
        constraints={"ge": 1, "le": 10_000},
    )
    ca_file: Path | None = option(
        None,
        "PEM CA bundle trusted for https:// webhooks (re-read when it changes).",
        panel=SECURITY,
        reads=watched(pem_file),
    )
    cert_file: Path | None = option(
        None,
        "PEM client certificate (chain) presented to https:// webhooks, with --webhook-key-file "
        "(re-read when it changes).",
        panel=SECURITY,
        reads=watched(pem_file),
    )
    key_file: Path | None = option(
        None,
        "PEM private key of --webhook-cert-file (re-read when it changes).",
        panel=SECURITY,
        reads=watched(pem_file),
    )
    oauth2_token_url: str | None = option(
        None,
        "OAuth2 token endpoint: each webhook request carries a client-credentials bearer token "
        "from it (needs --webhook-oauth2-client-id-file and --webhook-oauth2-client-secret-file).",
        panel=SECURITY,
    )
    oauth2_client_id_file: Path | None = option(
        None,
        f"File holding the OAuth2 client id ({STRIPPED_WATCHED}).",
        panel=SECURITY,
        reads=watched(one_secret_file),
    )
    oauth2_client_secret_file: Path | None = option(
        None,
        f"File holding the OAuth2 client secret ({STRIPPED_WATCHED}).",
        panel=SECURITY,
        reads=watched(one_secret_file),
        secret=True,
    )
    oauth2_scope: str | None = option(
        None, "OAuth2 scope asked for (space-separated scopes).", panel=SECURITY
    )
    oauth2_audience: str | None = option(
        None, "OAuth2 audience asked for (the 'audience' parameter of Auth0 and others).", panel=SECURITY
    )
    oauth2_client_auth: Literal["basic", "post"] = option(
        "basic",
        "How the OAuth2 client authenticates: basic (HTTP Basic, RFC 6749's default) or post "
        "(client_id and client_secret in the form body).",
        panel=SECURITY,
    )
    proxy_url: str | None = option(
        None,
        "Forward proxy for webhook and token requests: http://HOST:PORT (https:// targets go "
        "through CONNECT, verified end to end); credentials only from the proxy files.",
    )
    proxy_username_file: Path | None = option(
        None,
        f"File holding the proxy's username ({STRIPPED_WATCHED}).",
        panel=SECURITY,
        reads=watched(one_secret_file),
    )
    proxy_password_file: Path | None = option(
        None,
        f"File holding the proxy's password ({STRIPPED_WATCHED}).",
        panel=SECURITY,
        reads=watched(one_secret_file),
        secret=True,
    )
    no_proxy: str | None = option(
        None,
        "Hosts reached without the proxy, comma-separated: a name (and its subdomains), "
        "'.domain', an IP address, a CIDR block or '*'.",
    )

    #: What the files above hold now, re-read when they change: the signing keys (the sink signs
    #: with each of them), the extra headers (values may be credentials), the CA bundle, the
    #: client certificate and key, the OAuth2 client and the proxy's credentials.
    secrets: Material[tuple[bytes, ...]] | None = content_of("secret_file", _keys)
    headers: Material[tuple[tuple[str, str], ...]] | None = content_of("headers_file")
    ca: Material[bytes] | None = content_of("ca_file")
    cert: WatchedFile[bytes] | None = content_of("cert_file")
    key: WatchedFile[bytes] | None = content_of("key_file")
    oauth2_client_id: Material[str] | None = content_of("oauth2_client_id_file")
    oauth2_client_secret: Material[str] | None = content_of("oauth2_client_secret_file")
    proxy_username: Material[str] | None = content_of("proxy_username_file")
    proxy_password: Material[str] | None = content_of("proxy_password_file")
