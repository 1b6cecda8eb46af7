"""Pure Standard Webhooks (standardwebhooks.com) signing: secrets, signatures and headers.

A request signed this way carries

    webhook-id: <message id>              the envelope id: identical on every redelivery
    webhook-timestamp: <unix seconds>     when this attempt was sent
    webhook-signature: v1,<base64> [...]  one per key, space-separated (rotation with an overlap)

where each signature is ``base64(HMAC-SHA256(key, f"{id}.{timestamp}.".encode() + body))``. A
secret is written ``whsec_<base64 of the key>``, the form every Standard Webhooks library
(``standardwebhooks``, ``svix``) takes. No I/O and no clock: the caller passes the timestamp.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import Final

from relayd.secret import secret_lines

#: What starts a Standard Webhooks secret; the rest is the key, base64-encoded.
SECRET_PREFIX: Final = "whsec_"  # noqa: S105 - a format tag, not a password
SIGNATURE_VERSION: Final = "v1"
ID_HEADER: Final = "webhook-id"
TIMESTAMP_HEADER: Final = "webhook-timestamp"
SIGNATURE_HEADER: Final = "webhook-signature"


def decode_secret(secret: str) -> bytes:
    """The HMAC key of a ``whsec_<base64>`` secret (padding may be left out, as the libraries allow).

    Raises:
        ValueError: not ``whsec_`` followed by non-empty base64; the message never shows the secret.
    """
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError("is not a 'whsec_<base64>' secret")
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("holds a 'whsec_' secret that is not valid base64") from None
    if not key:
        raise ValueError("holds an empty 'whsec_' secret")
    return key


def parse_secret_lines(text: str) -> tuple[str, ...]:
    """The ``whsec_`` secrets of a secret file, one a line (stripped, blank lines skipped), checked.

    Raises:
        ValueError: no secret, or a line that is not a ``whsec_<base64>`` secret (named by its
            number, never shown).
    """
    lines = secret_lines(text)
    if not lines:
        raise ValueError("is empty")
    for number, line in enumerate(lines, start=1):
        try:
            decode_secret(line)
        except ValueError as exc:
            raise ValueError(f"secret {number} {exc}") from None
    return lines


def sign(key: bytes, message_id: str, timestamp_s: int, body: bytes) -> str:
    """One ``v1,<base64>`` signature of ``body`` sent as ``message_id`` at ``timestamp_s``."""
    signed = f"{message_id}.{timestamp_s}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode()}"


def sign_all(keys: tuple[bytes, ...], message_id: str, timestamp_s: int, body: bytes) -> str:
    """The ``webhook-signature`` value: one signature per key, space-separated, in the keys' order."""
    return " ".join(sign(key, message_id, timestamp_s, body) for key in keys)


def headers(keys: tuple[bytes, ...], message_id: str, timestamp_s: int, body: bytes) -> dict[str, str]:
    """The Standard Webhooks headers of one request (no signature without a key)."""
    sent = {ID_HEADER: message_id, TIMESTAMP_HEADER: str(timestamp_s)}
    if keys:
        sent[SIGNATURE_HEADER] = sign_all(keys, message_id, timestamp_s, body)
    return sent
