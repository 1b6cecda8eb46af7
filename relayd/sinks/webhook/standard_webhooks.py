"""Pure Standard Webhooks (standardwebhooks.com) signing: secrets, signatures and headers.

A request signed this way carries

    webhook-id: <message id>              the envelope id: identical on every redelivery
    webhook-timestamp: <unix seconds>     when this attempt was sent
    webhook-signature: v1,<base64> [...]  one per key, space-separated (rotation with an overlap)

where each signature is ``base64(HMAC-SHA256(key, f"{id}.{timestamp}.".encode() + body))``. A
secret is written ``whsec_<base64 of the key>``, the form every Standard Webhooks library
(``standardwebhooks``, ``svix``) takes. A line ``whsk_<base64>`` is instead an ed25519 secret
key (its 32-byte seed, or the 64 bytes of seed and public key), which signs asymmetrically:
``v1a,<base64 of the ed25519 signature>`` over the same bytes, verified with the public key
``whpk_<base64 of its 32 bytes>`` (``public_key``), which is no secret. The two kinds may share a
file: each line gives its own signature. No I/O and no clock: the caller passes the timestamp.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
from typing import Any, Final

from relayd.extras import install_command
from relayd.security.secret import secret_lines

#: What starts a Standard Webhooks secret; the rest is the key, base64-encoded.
SECRET_PREFIX: Final = "whsec_"  # noqa: S105 - a format tag, not a password
SIGNATURE_VERSION: Final = "v1"
#: What starts an ed25519 secret key, and its public key; the rest is base64.
ASYMMETRIC_PREFIX: Final = "whsk_"
PUBLIC_PREFIX: Final = "whpk_"
ASYMMETRIC_VERSION: Final = "v1a"
#: Bytes of an ed25519 seed (the secret key), and of a seed followed by its public key.
_SEED_BYTES: Final = 32
_PAIR_BYTES: Final = 64
ID_HEADER: Final = "webhook-id"
TIMESTAMP_HEADER: Final = "webhook-timestamp"
SIGNATURE_HEADER: Final = "webhook-signature"


class Ed25519Key(bytes):
    """A ``whsk_`` secret's ed25519 seed: bytes, like an HMAC key, so it travels the same tuple of
    keys from the secret file to ``sign``, which tells the two apart by this type."""

    __slots__ = ()


def decode_secret(secret: str) -> bytes:
    """The HMAC key of a ``whsec_<base64>`` secret, or the ``Ed25519Key`` of a ``whsk_<base64>``
    one (padding may be left out, as the libraries allow).

    Raises:
        ValueError: neither prefix followed by non-empty base64, an ed25519 key of the wrong
            size or whose public half is not its own, or no ``cryptography`` for one; the message
            never shows the secret.
    """
    if secret.startswith(ASYMMETRIC_PREFIX):
        return _ed25519_key(_base64(secret.removeprefix(ASYMMETRIC_PREFIX), ASYMMETRIC_PREFIX))
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError("is not a 'whsec_<base64>' secret")
    return _base64(secret.removeprefix(SECRET_PREFIX), SECRET_PREFIX)


def _base64(encoded: str, prefix: str) -> bytes:
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"holds a '{prefix}' secret that is not valid base64") from None
    if not key:
        raise ValueError(f"holds an empty '{prefix}' secret")
    return key


#: ed25519 keys kept made: the secret file is read again for every request, and making a key
#: (and checking a pair's public half) costs more than the signature itself.
_KEYS_KEPT: Final = 64


@functools.lru_cache(maxsize=_KEYS_KEPT)
def _ed25519_key(raw: bytes) -> Ed25519Key:
    if len(raw) not in {_SEED_BYTES, _PAIR_BYTES}:
        raise ValueError(f"holds a 'whsk_' key of {len(raw)} bytes, not an ed25519 seed (32) or pair (64)")
    key = Ed25519Key(raw[:_SEED_BYTES])
    if len(raw) == _PAIR_BYTES and _public_bytes(key) != raw[_SEED_BYTES:]:
        raise ValueError("holds a 'whsk_' key pair whose public half is not its secret key's")
    return key


@functools.lru_cache(maxsize=_KEYS_KEPT)
def _private_key(key: Ed25519Key) -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    except ImportError:
        raise ValueError(
            f"is a 'whsk_' key, which needs cryptography: {install_command('ed25519')}"
        ) from None
    return Ed25519PrivateKey.from_private_bytes(bytes(key))


def _public_bytes(key: Ed25519Key) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return bytes(_private_key(key).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


def public_key(secret: str) -> str:
    """The ``whpk_<base64>`` public key of a ``whsk_`` secret: what receivers verify ``v1a`` with.

    Raises:
        ValueError: ``secret`` is not a valid ``whsk_`` secret (as ``decode_secret``).
    """
    key = decode_secret(secret)
    if not isinstance(key, Ed25519Key):
        raise ValueError("is not a 'whsk_<base64>' secret: a 'whsec_' secret has no public key")
    return PUBLIC_PREFIX + base64.b64encode(_public_bytes(key)).decode()


def parse_secret_lines(text: str) -> tuple[str, ...]:
    """The ``whsec_`` (and ``whsk_``) secrets of a secret file, one a line (stripped, blank lines
    skipped), checked.

    Raises:
        ValueError: no secret, or a line that is not a valid secret (named by its number, never
            shown).
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
    """One signature of ``body`` sent as ``message_id`` at ``timestamp_s``: ``v1,<base64>`` with
    an HMAC key, ``v1a,<base64>`` with an ``Ed25519Key``."""
    signed = f"{message_id}.{timestamp_s}.".encode() + body
    if isinstance(key, Ed25519Key):
        return f"{ASYMMETRIC_VERSION},{base64.b64encode(_private_key(key).sign(signed)).decode()}"
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
