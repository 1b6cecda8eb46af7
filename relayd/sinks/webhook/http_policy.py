"""Pure webhook rules: the signature scheme, HTTP status → outcome, ``Retry-After`` parsing and
the operator's extra headers file.

No I/O and no clock: callers pass ``now_s`` (epoch seconds). See ``relayd.sinks.webhook.sink`` for
the receiver-facing description of the signature.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from email.utils import parsedate_to_datetime
from typing import Final, Literal

from relayd.sinks.base import DELIVERED, Outcome, Permanent, Retry
from relayd.sinks.webhook import standard_webhooks
from relayd.sinks.webhook.http_excerpt import body_excerpt

#: Statuses that mean "not now": the receiver may accept the same request later (and every 5xx).
RETRYABLE_STATUSES: Final = frozenset({408, 425, 429})
#: The status by which an endpoint says it is gone for good (Standard Webhooks: stop sending).
GONE: Final = 410
#: Refusals about the sink rather than the entry when many targets get them at once: what to check.
WHOLESALE_HINTS: Final = {
    401: "check the credentials (a secret or headers file rotated on one side only?)",
    403: "check the credentials (a secret or headers file rotated on one side only?)",
    404: "check the webhook URL (the receiver has no such endpoint)",
}
#: Statuses after which a request of several entries is split to find the entry refused: the
#: receiver answered about the content (a 500 from its handler, a 4xx about the body), not
#: "not now" (429, 503, ...) nor about the credentials or the URL.
_NOT_ABOUT_CONTENT: Final = frozenset({GONE, 502, 503, 504, *RETRYABLE_STATUSES, *WHOLESALE_HINTS})
SIGNATURE_VERSION: Final = "v1"
#: The signing schemes of ``--webhook-signature``.
SignatureScheme = Literal["standard", "relayd"]
#: Header names the sink sets itself (or the HTTP client does): an extra headers file may not.
RESERVED_HEADERS: Final = frozenset(
    {
        "content-type",
        "content-length",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "host",
        "idempotency-key",
        "x-relayd-timestamp",
        "x-relayd-signature",
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "traceparent",
        "tracestate",
    }
)
#: An RFC 9110 field name (a token).
_FIELD_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: A field value: visible ASCII, spaces and tabs inside, nothing else (no CR, LF or NUL).
_FIELD_VALUE: Final = re.compile(r"[\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?")


def sign(secret: bytes, timestamp_s: int, body: bytes) -> str:
    """Return the ``X-Relayd-Signature`` value: ``v1=<hex hmac_sha256(secret, "{ts}." + body)>``."""
    digest = hmac.new(secret, f"{timestamp_s}.".encode() + body, hashlib.sha256).hexdigest()
    return f"{SIGNATURE_VERSION}={digest}"


def sign_all(secrets: tuple[bytes, ...], timestamp_s: int, body: bytes) -> str:
    """The header value with one signature per secret, space-separated (rotation with an overlap)."""
    return " ".join(sign(secret, timestamp_s, body) for secret in secrets)


def signature_headers(
    scheme: SignatureScheme, keys: tuple[bytes, ...], message_id: str, timestamp_s: int, body: bytes
) -> dict[str, str]:
    """The signing headers of one request under ``scheme``.

    ``standard``: ``webhook-id``, ``webhook-timestamp`` and, with keys, ``webhook-signature``
    (``relayd.sinks.webhook.standard_webhooks``). ``relayd``: with keys, ``X-Relayd-Timestamp`` and
    ``X-Relayd-Signature``; nothing without.
    """
    if scheme == "standard":
        return standard_webhooks.headers(keys, message_id, timestamp_s, body)
    if not keys:
        return {}
    return {"X-Relayd-Timestamp": str(timestamp_s), "X-Relayd-Signature": sign_all(keys, timestamp_s, body)}


def verify(secret: bytes, timestamp: str, body: bytes, signature: str) -> bool:
    """Check a header the way a receiver does: one of its signatures matches (constant-time)."""
    if not timestamp.isdigit():
        return False
    expected = sign(secret, int(timestamp), body)
    return any(hmac.compare_digest(expected, offered) for offered in signature.split(" "))


def parse_retry_after(value: str | None, now_s: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta seconds or an HTTP-date); None if absent/bad."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now_s)


def classify_status(status: int, retry_after: str | None, now_s: float, body: bytes = b"") -> Outcome:
    """Map an HTTP response to an outcome.

    2xx → Delivered; 408, 425, 429 and 5xx → Retry (honouring ``Retry-After``); 410 → Permanent
    ``"http 410 endpoint gone"`` (the receiver asks to stop, as Standard Webhooks recommends);
    any other status (4xx, and 1xx/3xx since redirects are not followed) → Permanent
    ``"http <status>"``, marked ``wholesale`` for 401, 403 and 404 (``WHOLESALE_HINTS``). A
    failure's text ends with a short, redacted excerpt of ``body`` (``http 422: {...}``).
    """
    if 200 <= status < 300:
        return DELIVERED
    excerpt = body_excerpt(body)
    label = f"http {status} endpoint gone" if status == GONE else f"http {status}"
    text = f"{label}: {excerpt}" if excerpt else label
    if status == GONE:
        return Permanent(reason=text)
    if status in RETRYABLE_STATUSES or status >= 500:
        return Retry(error=text, after_s=parse_retry_after(retry_after, now_s))
    return Permanent(reason=text, wholesale=WHOLESALE_HINTS.get(status, ""))


def about_content(status: int, retry_after: str | None) -> bool:
    """Whether a refusal may be about one entry of a request of several (worth splitting it):
    a 500 or a 4xx about the body, without ``Retry-After``."""
    return 400 <= status < 600 and status not in _NOT_ABOUT_CONTENT and retry_after is None


def parse_header_lines(text: str) -> tuple[tuple[str, str], ...]:
    """The extra headers of a headers file: one ``Name: value`` a line, in order.

    Blank lines and lines starting with ``#`` are skipped. A name is an HTTP token and not one
    the sink sets itself (``RESERVED_HEADERS``); a value is non-empty visible ASCII. An error
    names the line number and, at most, the header name: a value (a bearer token) never
    appears in it.

    Raises:
        ValueError: a line that is not a valid ``Name: value`` header.
    """
    headers: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        name, colon, value = stripped.partition(":")
        name, value = name.strip(), value.strip()
        if not colon or not _FIELD_NAME.fullmatch(name):
            raise ValueError(f"line {number} is not 'Name: value' with a valid header name")
        if name.lower() in RESERVED_HEADERS:
            raise ValueError(f"line {number}: {name!r} is set by relayd itself")
        if not _FIELD_VALUE.fullmatch(value):
            raise ValueError(f"line {number}: the value of {name!r} is empty or not printable ASCII")
        headers.append((name, value))
    return tuple(headers)
