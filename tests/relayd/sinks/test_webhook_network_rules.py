"""The pure rules behind the webhook's proxy and OAuth2 options: no-proxy matching, the proxy URL
check, the grant request and the token endpoint's answer."""

from __future__ import annotations

import base64

import pytest

from relayd.security.material import Fixed
from relayd.sinks.webhook.oauth2 import ClientCredentials, TokenUnavailable, grant_request, parse_token_answer
from relayd.sinks.webhook.proxy import check_proxy_url, parse_no_proxy


@pytest.mark.parametrize(
    ("no_proxy", "host", "bypasses"),
    [
        ("example.com", "example.com", True),
        ("example.com", "hooks.example.com", True),
        (".example.com", "hooks.example.com", True),
        ("example.com", "badexample.com", False),
        ("example.com", "example.com.evil.net", False),
        ("10.0.0.0/8", "10.1.2.3", True),
        ("10.0.0.0/8", "11.1.2.3", False),
        ("127.0.0.1", "127.0.0.1", True),
        ("::1", "[::1]", True),
        ("*", "anything.example", True),
        ("", "example.com", False),
        ("a.example, b.example", "HOOKS.B.EXAMPLE.", True),
    ],
)
def test_no_proxy_matches_names_subdomains_addresses_and_blocks(
    no_proxy: str, host: str, bypasses: bool
) -> None:
    assert parse_no_proxy(no_proxy).bypasses(host) is bypasses


def test_a_bad_no_proxy_entry_is_refused() -> None:
    with pytest.raises(ValueError, match="'bad host!' is not a host name"):
        parse_no_proxy("example.com, bad host!")


def test_the_proxy_url_error_never_shows_its_credentials() -> None:
    with pytest.raises(ValueError, match="holds credentials") as refused:
        check_proxy_url("http://relayd:pa55@proxy.example.com:3128")

    assert "pa55" not in str(refused.value)
    assert check_proxy_url("http://proxy.example.com:3128") == "http://proxy.example.com:3128"


def test_basic_client_auth_form_encodes_the_pair_before_base64() -> None:
    """RFC 6749 §2.3.1: id and secret are form-encoded, then joined and base64-encoded."""
    client = ClientCredentials("https://idp/token", Fixed("id:1"), Fixed("s e+cret"), scope="a b")

    form, headers = grant_request(client)

    assert form == {"grant_type": "client_credentials", "scope": "a b"}
    assert base64.b64decode(headers["Authorization"].removeprefix("Basic ")) == b"id%3A1:s+e%2Bcret"


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (200, b'{"access_token": "t", "token_type": "Bearer", "expires_in": 60}', ("t", 60.0)),
        (200, b'{"access_token": "t", "token_type": "bearer", "expires_in": "60"}', ("t", 60.0)),
        (200, b'{"access_token": "t"}', ("t", None)),
    ],
)
def test_a_token_answer_gives_the_token_and_its_lifetime(
    status: int, body: bytes, expected: tuple[str, float | None]
) -> None:
    assert parse_token_answer(status, body) == expected


@pytest.mark.parametrize(
    ("status", "body", "says"),
    [
        (400, b'{"error": "invalid_client", "client_secret": "s3cret"}', "http 400"),
        (200, b"<html>", "not JSON"),
        (200, b'{"token_type": "Bearer"}', "no access_token"),
        (200, b'{"access_token": "t", "token_type": "mac"}', "not Bearer"),
    ],
)
def test_a_bad_token_answer_is_unavailable_without_the_secret(status: int, body: bytes, says: str) -> None:
    with pytest.raises(TokenUnavailable, match=says) as failed:
        parse_token_answer(status, body)

    assert "s3cret" not in str(failed.value)
