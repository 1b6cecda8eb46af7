"""Standard Webhooks asymmetric signatures: a ``whsk_`` line of ``--webhook-secret-file`` signs
``v1a,<base64>`` with ed25519, which a receiver verifies with the ``whpk_`` public key alone
(here with ``cryptography``, which relayd's signing does not share code with)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import standardwebhooks
from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from support.http_receiver import serve_on_this_loop

from relayd.config.settings import load_settings
from relayd.sinks import DELIVERED, resolve_sink
from relayd.sinks.webhook import standard_webhooks as sw

from .conftest import deliver_runs, outbox

#: RFC 8032's first ed25519 test key: its seed and its public key.
RFC_SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
RFC_PUBLIC = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
SECRET = "whsk_" + base64.b64encode(RFC_SEED).decode()
HMAC_SECRET = "whsec_" + base64.b64encode(b"h" * 32).decode()


def verify_v1a(public: str, message_id: str, timestamp: str, body: bytes, signatures: str) -> bool:
    """A receiver's check: one ``v1a`` signature that the ``whpk_`` key verifies over id.timestamp.body."""
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public.removeprefix("whpk_")))
    for entry in signatures.split(" "):
        version, signature = entry.split(",")
        if version != "v1a":
            continue
        try:
            key.verify(base64.b64decode(signature), f"{message_id}.{timestamp}.".encode() + body)
        except InvalidSignature:
            continue
        return True
    return False


def test_the_public_key_of_a_whsk_secret_is_whpk_and_its_raw_32_bytes() -> None:
    assert sw.public_key(SECRET) == "whpk_" + base64.b64encode(RFC_PUBLIC).decode()


def test_a_v1a_signature_verifies_with_the_public_key_and_only_for_what_was_signed() -> None:
    key = sw.decode_secret(SECRET)
    public = sw.public_key(SECRET)

    signature = sw.sign(key, "p:outbox:1", 1_700_000_000, b'{"a":1}')

    assert signature.startswith("v1a,")
    assert verify_v1a(public, "p:outbox:1", "1700000000", b'{"a":1}', signature)
    assert not verify_v1a(public, "p:outbox:1", "1700000000", b'{"a":2}', signature)
    assert not verify_v1a(public, "p:outbox:2", "1700000000", b'{"a":1}', signature)
    assert not verify_v1a(public, "p:outbox:1", "1700000001", b'{"a":1}', signature)


def test_the_64_byte_pair_form_signs_as_its_seed_and_a_pair_that_is_not_one_is_refused() -> None:
    pair = "whsk_" + base64.b64encode(RFC_SEED + RFC_PUBLIC).decode()
    other = "whsk_" + base64.b64encode(RFC_SEED + bytes(32)).decode()

    assert sw.sign(sw.decode_secret(pair), "i", 7, b"{}") == sw.sign(sw.decode_secret(SECRET), "i", 7, b"{}")
    with pytest.raises(ValueError, match="public half is not its secret key's") as caught:
        sw.decode_secret(other)
    assert "9d61" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("whsk_", "secret 1 holds an empty 'whsk_' secret"),
        ("whsk_aGk=", "secret 1 holds a 'whsk_' key of 2 bytes, not an ed25519 seed (32) or pair (64)"),
        (f"{HMAC_SECRET}\nwhsk_!!", "secret 2 holds a 'whsk_' secret that is not valid base64"),
    ],
    ids=["empty", "wrong-size", "not-base64"],
)
def test_a_bad_whsk_line_is_refused_by_number(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=r".") as caught:
        sw.parse_secret_lines(text)

    assert str(caught.value) == problem


def test_a_whsec_secret_has_no_public_key() -> None:
    with pytest.raises(ValueError, match="has no public key"):
        sw.public_key(HMAC_SECRET)


async def test_a_file_of_both_kinds_signs_each_request_v1_and_v1a_for_either_receiver(tmp_path: Path) -> None:
    """Moving from a shared secret to a key pair: the HMAC receiver and the public-key one both accept."""
    secrets = tmp_path / "secrets"
    secrets.write_text(f"{HMAC_SECRET}\n{SECRET}\n")
    options = load_settings(webhook_secret_file=secrets).sink_options()
    received: list[tuple[dict[str, str], bytes]] = []

    async def receive(request: web.Request) -> web.Response:
        received.append((dict(request.headers), await request.read()))
        return web.Response(status=204)

    batch = [outbox("ed", 1, "exe-1")]
    async with serve_on_this_loop(receive) as url:
        sink = resolve_sink(f"webhook:{url}", options)  # as the relay does: with the sink's own options
        await sink.start()
        outcomes = await deliver_runs(sink, batch)
        await sink.close()

    assert outcomes == [DELIVERED]
    ((headers, body),) = received
    versions = [entry.split(",")[0] for entry in headers["webhook-signature"].split(" ")]
    assert versions == ["v1", "v1a"]  # the file's order
    standardwebhooks.Webhook(HMAC_SECRET).verify(body, headers)
    assert verify_v1a(
        sw.public_key(SECRET),
        headers["webhook-id"],
        headers["webhook-timestamp"],
        body,
        headers["webhook-signature"],
    )
