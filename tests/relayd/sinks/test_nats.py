"""The nats sink against a real nats-server with JetStream: payloads, Nats-Msg-Id dedupe, order
per subject, a missing stream, oversize, an unreachable server, the configuration it refuses,
a rotated token and a rotated CA bundle."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import orjson
import pytest
from nats.js.api import StreamConfig
from support.nats import nats_server_path
from support.processes import end_process
from support.redis_server import free_port
from support.tls import old_and_new_pki

from relayd.envelope.batch import Batch
from relayd.errors import ConfigError
from relayd.security.material import Fixed, pem_file, secret_file
from relayd.sinks import DELIVERED, Permanent, Retry, SinkOptions, parse_sink_spec
from relayd.sinks.nats.options import NatsOptions
from relayd.sinks.nats.sink import NatsSink

from .conftest import outbox

pytestmark = pytest.mark.slow


@pytest.fixture
async def jetstream(nats_server) -> AsyncIterator:
    connection = await nats.connect(nats_server.url)
    yield connection.jetstream()
    await connection.close()


@pytest.fixture
def make_sink(started):
    async def make(target: str, options: SinkOptions | None = None) -> NatsSink:
        return await started(NatsSink(parse_sink_spec(f"nats:{target}"), options or SinkOptions()))

    return make


async def read_stream(js, stream: str) -> list:
    """Every message of ``stream`` in stream order."""
    info = await js.stream_info(stream)
    return [await js.get_msg(stream, seq) for seq in range(1, info.state.last_seq + 1)]


async def test_every_message_is_its_envelope_with_its_id_in_order_per_target_subject(
    nats_server, jetstream, make_sink, prefix
):
    await jetstream.add_stream(StreamConfig(name=prefix, subjects=[f"{prefix}.>"]))
    sink = await make_sink(f"{nats_server.url}?subject={{prefix}}.{{kind}}.{{target}}")
    batch = [outbox(prefix, seq, f"target-{seq % 5}" if seq % 7 else None) for seq in range(1, 301)]

    outcomes = await sink.deliver(Batch.of(batch))

    assert outcomes == [DELIVERED] * len(batch)
    assert sink.ready()
    messages = await read_stream(jetstream, prefix)
    assert [m.data for m in messages] == [e.to_json() for e in batch]  # one connection: batch order
    for message, envelope in zip(messages, batch, strict=True):
        assert message.headers["Nats-Msg-Id"] == envelope.id
        assert message.subject == f"{prefix}.outbox.{envelope.ordering_key or '_'}"


async def test_a_redelivery_is_delivered_and_stored_once(nats_server, jetstream, make_sink, prefix):
    await jetstream.add_stream(StreamConfig(name=prefix, subjects=[f"{prefix}.events"]))
    sink = await make_sink(f"{nats_server.url}?subject={prefix}.events")
    batch = [outbox(prefix, 1, "t"), outbox(prefix, 2, None)]

    first = await sink.deliver(Batch.of(batch))
    again = await sink.deliver(Batch.of(batch))

    assert first == again == [DELIVERED, DELIVERED]
    messages = await read_stream(jetstream, prefix)
    assert [orjson.loads(m.data)["id"] for m in messages] == [e.id for e in batch]


async def test_no_stream_for_the_subject_is_retry_and_not_ready_until_one_exists(
    nats_server, jetstream, make_sink, prefix
):
    sink = await make_sink(f"{nats_server.url}?subject={prefix}.nostream")

    outcomes = await sink.deliver(Batch.of([outbox(prefix, 1, "t")]))

    assert isinstance(outcomes[0], Retry)
    assert "no JetStream stream" in outcomes[0].error
    assert not sink.ready()
    await jetstream.add_stream(StreamConfig(name=prefix, subjects=[f"{prefix}.nostream"]))
    assert await sink.deliver(Batch.of([outbox(prefix, 1, "t")])) == [DELIVERED]
    assert sink.ready()


async def test_a_message_over_max_payload_is_permanent_and_the_rest_delivered(
    nats_server, jetstream, make_sink, prefix
):
    await jetstream.add_stream(StreamConfig(name=prefix, subjects=[f"{prefix}.big"]))
    sink = await make_sink(f"{nats_server.url}?subject={prefix}.big")
    huge = outbox(prefix, 2, "t", {"id": "ev-2", "kind": "Blob", "data": {"x": "y" * 2_000_000}})

    outcomes = await sink.deliver(Batch.of([outbox(prefix, 1, "t"), huge, outbox(prefix, 3, "t")]))

    assert outcomes[0] == outcomes[2] == DELIVERED
    assert isinstance(outcomes[1], Permanent)
    assert "too large" in outcomes[1].reason


async def test_an_invalid_subject_for_an_entry_is_permanent_and_the_rest_delivered(
    nats_server, jetstream, make_sink, prefix
):
    """Entries of one bad target share a subject, checked once: each of them is Permanent."""
    await jetstream.add_stream(StreamConfig(name=prefix, subjects=[f"{prefix}.>"]))
    sink = await make_sink(f"{nats_server.url}?subject={prefix}.{{target}}")
    batch = [outbox(prefix, 1, "ok"), outbox(prefix, 2, "bad target"), outbox(prefix, 3, "bad target")]

    outcomes = await sink.deliver(Batch.of(batch))

    assert len(outcomes) == 3
    assert outcomes[0] == DELIVERED
    assert all(isinstance(o, Permanent) and "subject" in o.reason for o in outcomes[1:])
    assert [m.subject for m in await read_stream(jetstream, prefix)] == [f"{prefix}.ok"]


async def test_an_unreachable_server_is_retry_and_not_ready(make_sink, prefix):
    sink = await make_sink(f"nats://127.0.0.1:{free_port()}?subject=x&timeout_s=2")

    outcomes = await sink.deliver(Batch.of([outbox(prefix, 1, "t")]))

    assert isinstance(outcomes[0], Retry)
    assert not sink.ready()


@pytest.mark.parametrize(
    ("target", "options", "message"),
    [
        ("nats://nats-1:4222?subject=e", SinkOptions(), "needs --allow-plaintext"),
        (
            "nats://nats-1:4222?subject=e",
            SinkOptions(own=NatsOptions(token=Fixed("t0k3n")), allow_plaintext=True),
            "refusing to send nats credentials",
        ),
        ("nats://u:pw@127.0.0.1:4222?subject=e", SinkOptions(), "credentials in the URL"),
        ("http://127.0.0.1:4222?subject=e", SinkOptions(), "nats://HOST:PORT"),
        ("nats://127.0.0.1:4222", SinkOptions(), "needs a subject"),
        ("nats://127.0.0.1:4222?subject=a.*", SinkOptions(), "not a valid NATS subject"),
    ],
    ids=["plaintext-remote", "token-plaintext", "url-credentials", "scheme", "no-subject", "wildcard"],
)
def test_a_spec_that_cannot_work_is_one_config_error(target, options, message):
    with pytest.raises(ConfigError, match=message) as caught:
        NatsSink(parse_sink_spec(f"nats:{target}"), options)

    assert "\n" not in str(caught.value)
    assert "t0k3n" not in str(caught.value)
    assert "pw" not in str(caught.value)


async def test_a_rotated_token_file_is_used_by_the_reconnect_to_a_server_with_a_new_token(
    tmp_path, make_sink, prefix
):
    """nats-server restarts wanting a new token; the sink reconnects with the token file as it is
    then (with a token read once, it retries the old one forever)."""
    port = free_port()
    config = tmp_path / "nats.conf"
    store = tmp_path / "js"

    def configure(token: str) -> None:
        config.write_text(
            f'listen: "127.0.0.1:{port}"\njetstream {{ store_dir: "{store}" }}\n'
            f'authorization {{ token: "{token}" }}\n'
        )

    configure("old-nats-token")
    server = subprocess.Popen(
        [nats_server_path(), "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    token_file = tmp_path / "token"
    token_file.write_text("old-nats-token\n")
    watched = secret_file("--nats-token-file", token_file)
    url = f"nats://127.0.0.1:{port}"
    try:
        admin = await _connect_when_up(url, "old-nats-token")
        await admin.jetstream().add_stream(StreamConfig(name=prefix, subjects=[f"{prefix}.>"]))
        await admin.close()
        sink = await make_sink(f"{url}?subject={prefix}.events", SinkOptions(own=NatsOptions(token=watched)))
        before = await sink.deliver(Batch.of([outbox(prefix, 1, "t")]))

        end_process(server)  # the server comes back wanting the new token: the sink must reconnect
        configure("new-nats-token")
        server = subprocess.Popen(
            [nats_server_path(), "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        token_file.write_text("new-nats-token\n")
        reloaded = watched.check()
        # until the reconnect with the new token went through
        after = await _deliver_until_delivered(sink, prefix)
        admin = await _connect_when_up(url, "new-nats-token")
        stored = await read_stream(admin.jetstream(), prefix)
        await admin.close()
    finally:
        end_process(server)

    assert before == [DELIVERED]
    assert reloaded == "reloaded"
    assert after == [DELIVERED]
    assert len(stored) == 2


async def _deliver_until_delivered(sink, prefix: str) -> list:
    """Deliver one entry at a time (seq 2 on) until one is delivered; the last outcomes."""
    after: list = []
    for seq in range(2, 2000):
        after = list(await sink.deliver(Batch.of([outbox(prefix, seq, "t")])))
        if after == [DELIVERED]:
            break
        await asyncio.sleep(0.05)
    return after


async def _connect_when_up(url: str, token: str):
    for _ in range(200):
        try:
            return await nats.connect(url, token=token, connect_timeout=1, allow_reconnect=False)
        except Exception:
            await asyncio.sleep(0.05)
    raise AssertionError(f"nats-server at {url} did not come up")


async def test_a_rotated_ca_file_verifies_the_reconnect_to_a_server_with_a_new_certificate(
    tmp_path, make_sink, prefix
):
    """nats-server restarts with a certificate of a new CA; once the watched bundle holds the new
    CA, the sink's reconnect verifies with it (with a context made once, it fails forever)."""
    old, new = old_and_new_pki(tmp_path)
    port = free_port()
    config = tmp_path / "nats.conf"
    store = tmp_path / "js"

    def configure(pki) -> subprocess.Popen:
        config.write_text(
            f'listen: "127.0.0.1:{port}"\njetstream {{ store_dir: "{store}" }}\n'
            f'tls {{ cert_file: "{pki.server_cert}"\n key_file: "{pki.server_key}" }}\n'
        )
        return subprocess.Popen(
            [nats_server_path(), "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    server = configure(old)
    bundle = tmp_path / "ca.crt"
    bundle.write_bytes(old.ca_cert.read_bytes())
    watched = pem_file("--nats-ca-file", bundle)
    url = f"tls://127.0.0.1:{port}"
    try:
        admin = await _connect_tls_when_up(url, old.ca_cert)
        await admin.jetstream().add_stream(StreamConfig(name=prefix, subjects=[f"{prefix}.>"]))
        await admin.close()
        options = SinkOptions(own=NatsOptions(ca_file=bundle, ca=watched))
        sink = await make_sink(f"{url}?subject={prefix}.events&timeout_s=2", options)
        before = await sink.deliver(Batch.of([outbox(prefix, 1, "t")]))

        end_process(server)  # the server comes back with the new CA's certificate: the sink must reconnect
        server = configure(new)
        bundle.write_bytes(new.ca_cert.read_bytes())
        reloaded = watched.check()
        # until the reconnect verified with the new CA
        after = await _deliver_until_delivered(sink, prefix)
        admin = await _connect_tls_when_up(url, new.ca_cert)
        stored = await read_stream(admin.jetstream(), prefix)
        await admin.close()
    finally:
        end_process(server)

    assert before == [DELIVERED]
    assert reloaded == "reloaded"
    assert after == [DELIVERED]
    assert len(stored) == 2


async def _connect_tls_when_up(url: str, ca: Path):
    context = ssl.create_default_context(cafile=str(ca))
    for _ in range(200):
        try:
            return await nats.connect(url, tls=context, connect_timeout=1, allow_reconnect=False)
        except Exception:
            await asyncio.sleep(0.05)
    raise AssertionError(f"nats-server at {url} did not come up")
