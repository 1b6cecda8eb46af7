"""The amqp sink against a real RabbitMQ: message shape, per-queue order, unroutable, outages, TLS."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
import pytest
from support.rabbitmq import RabbitServer, declare, drain
from support.redis_server import free_port
from typer.testing import CliRunner

from relayd.cli.app import app
from relayd.envelope.batch import Batch
from relayd.errors import ConfigError
from relayd.extras import missing_extra
from relayd.security.material import Fixed, pem_file
from relayd.sinks import DELIVERED, Retry, SinkOptions, parse_sink_spec, resolve_sink
from relayd.sinks.amqp.options import AmqpOptions
from relayd.sinks.amqp.sink import AmqpSink
from relayd.sinks.amqp.target import parse_amqp_target

from .conftest import outbox, spawn, timer

MakeSink = Callable[..., Awaitable[AmqpSink]]


@pytest.fixture
def names() -> tuple[str, str]:
    """A fresh exchange and queue-name stem per test (the broker is shared by the session)."""
    stem = uuid.uuid4().hex[:10]
    return f"x-{stem}", f"q-{stem}"


@pytest.fixture
def make_sink(started) -> MakeSink:
    async def make(spec: str, **options: object) -> AmqpSink:
        """``password`` and ``ca_file`` are the sink's own options, the rest common ones."""
        password, ca_file = options.pop("password", None), options.pop("ca_file", None)
        own = AmqpOptions(
            password=Fixed(str(password)) if password is not None else None,
            ca_file=Path(str(ca_file)) if ca_file is not None else None,
        )
        return await started(AmqpSink(parse_sink_spec(spec), SinkOptions(own=own, **options)))  # type: ignore[arg-type]

    return make


async def test_every_envelope_arrives_persistent_as_json_with_its_id_in_batch_order(
    rabbitmq_server: RabbitServer, names: tuple[str, str], make_sink: MakeSink
) -> None:
    exchange, queue = names
    await declare(rabbitmq_server.url, exchange, {queue: "ev.#"})
    sink = await make_sink(
        f"amqp:{rabbitmq_server.url}?exchange={exchange}&routing_key=ev.{{kind}}.{{target}}"
    )
    batch = [outbox("p", seq, f"exe-{seq % 3}") for seq in range(1, 41)]

    outcomes = await sink.deliver(Batch.of(batch))

    assert outcomes == [DELIVERED] * len(batch)
    got = await drain(rabbitmq_server.url, queue)
    assert [m.body for m in got] == [e.to_json() for e in batch]
    assert [m.message_id for m in got] == [e.id for e in batch]
    assert [m.routing_key for m in got] == [f"ev.outbox.exe-{seq % 3}" for seq in range(1, 41)]
    assert {(m.content_type, m.delivery_mode, m.type) for m in got} == {("application/json", 2, "outbox")}
    assert sink.ready()


async def test_routing_key_templates_give_each_target_its_queue_in_order(
    rabbitmq_server: RabbitServer, names: tuple[str, str], make_sink: MakeSink
) -> None:
    exchange, stem = names
    bindings = {f"{stem}-a": "p.timer.a", f"{stem}-b": "p.timer.b", f"{stem}-spawn": "p.spawn.#"}
    await declare(rabbitmq_server.url, exchange, bindings)
    sink = await make_sink(
        f"amqp:{rabbitmq_server.url}?exchange={exchange}&routing_key={{prefix}}.{{kind}}.{{target}}"
    )
    timers = [timer("p", "ab"[n % 2], f"s/{n}", 100.0 + n) for n in range(10)]
    spawns = [spawn("p", n, "a", f"a.c{n}", root_path="r", context={}) for n in range(3)]

    assert await sink.deliver(Batch.of(timers)) == [DELIVERED] * 10
    assert await sink.deliver(Batch.of(spawns)) == [DELIVERED] * 3

    for target in "ab":
        got = await drain(rabbitmq_server.url, f"{stem}-{target}")
        assert [orjson.loads(m.body)["fire_at"] for m in got] == [
            t.body["fire_at"] for t in timers if t.ordering_key == target
        ]
    assert [m.message_id for m in await drain(rabbitmq_server.url, f"{stem}-spawn")] == [e.id for e in spawns]


async def test_an_unroutable_message_is_retry_and_the_sink_not_ready_until_a_queue_is_bound(
    rabbitmq_server: RabbitServer, names: tuple[str, str], make_sink: MakeSink
) -> None:
    """Returned messages are never acked; the later entries of a returned target are held back."""
    exchange, queue = names
    await declare(rabbitmq_server.url, exchange, {queue: "ev.bound"})
    sink = await make_sink(f"amqp:{rabbitmq_server.url}?exchange={exchange}&routing_key=ev.{{target}}")
    batch = [outbox("p", 1, "bound"), outbox("p", 2, "nowhere"), outbox("p", 3, "bound")]

    outcomes = await sink.deliver(Batch.of(batch))

    assert outcomes[0] == DELIVERED
    assert outcomes[2] == DELIVERED
    assert isinstance(outcomes[1], Retry)
    assert "no queue bound" in outcomes[1].error
    assert not sink.ready()
    assert "unroutable" in (sink.not_ready_reason() or "")
    assert exchange in (sink.not_ready_reason() or "")

    await declare(rabbitmq_server.url, exchange, {f"{queue}-late": "ev.nowhere"})
    assert await sink.deliver(Batch.of([batch[1]])) == [DELIVERED]
    assert sink.ready()
    assert [m.message_id for m in await drain(rabbitmq_server.url, f"{queue}-late")] == ["p:outbox:2"]


async def test_a_confirmed_entry_behind_a_returned_one_of_its_target_is_reported_as_confirmed(
    rabbitmq_server: RabbitServer, names: tuple[str, str], make_sink: MakeSink
) -> None:
    """Target t's first entry is unroutable (by its prefix), its second is confirmed: the sink
    says so, and the engine holds it back (``plan.judge``), not the sink."""
    exchange, queue = names
    await declare(rabbitmq_server.url, exchange, {queue: "p2.#"})
    spec = f"amqp:{rabbitmq_server.url}?exchange={exchange}&routing_key={{prefix}}.{{target}}"
    sink = await make_sink(spec)
    batch = [outbox("p1", 1, "t"), outbox("p2", 2, "t"), outbox("p2", 3, "u")]

    outcomes = await sink.deliver(Batch.of(batch))

    assert isinstance(outcomes[0], Retry)
    assert outcomes[1] == DELIVERED
    assert outcomes[2] == DELIVERED


async def test_a_missing_exchange_is_retry_not_ready_then_recovers_on_a_new_channel(
    rabbitmq_server: RabbitServer, names: tuple[str, str], make_sink: MakeSink
) -> None:
    exchange, queue = names
    sink = await make_sink(f"amqp:{rabbitmq_server.url}?exchange={exchange}&routing_key=ev")
    batch = [outbox("p", n, None) for n in range(1, 4)]

    outcomes = await sink.deliver(Batch.of(batch))

    assert len(outcomes) == 3
    assert all(isinstance(o, Retry) for o in outcomes)
    assert "not found" in (sink.not_ready_reason() or "")
    await declare(rabbitmq_server.url, exchange, {queue: "ev"})
    assert await sink.deliver(Batch.of(batch)) == [DELIVERED] * 3
    assert sink.ready()


async def test_a_broker_that_is_not_there_is_retry_and_not_ready(make_sink: MakeSink) -> None:
    sink = await make_sink(f"amqp:amqp://127.0.0.1:{free_port()}/?routing_key=ev")

    outcomes = await sink.deliver(Batch.of([outbox("p", 1, "a")]))

    assert isinstance(outcomes[0], Retry)
    assert not sink.ready()
    assert "unreachable" in (sink.not_ready_reason() or "")


async def test_the_password_comes_from_options_and_a_wrong_one_is_never_shown(
    rabbitmq_server: RabbitServer, names: tuple[str, str], make_sink: MakeSink
) -> None:
    exchange, queue = names
    await declare(rabbitmq_server.url, exchange, {queue: "ev"})
    spec = f"amqp:{rabbitmq_server.url}?exchange={exchange}&routing_key=ev"
    good = await make_sink(spec, password="guest")
    bad = await make_sink(spec, password="s3cret-wrong")

    assert await good.deliver(Batch.of([outbox("p", 1, "a")])) == [DELIVERED]
    outcomes = await bad.deliver(Batch.of([outbox("p", 2, "a")]))

    assert isinstance(outcomes[0], Retry)
    assert not bad.ready()
    assert "s3cret" not in f"{outcomes[0]} {bad.not_ready_reason()}"


async def test_amqps_verifies_the_broker_with_the_ca_file(
    rabbitmq_server: RabbitServer, names: tuple[str, str], make_sink: MakeSink
) -> None:
    exchange, queue = names
    await declare(rabbitmq_server.url, exchange, {queue: "ev"})
    spec = f"amqp:{rabbitmq_server.tls_url}?exchange={exchange}&routing_key=ev"
    trusted = await make_sink(spec, ca_file=rabbitmq_server.pki.ca_cert)
    untrusted = await make_sink(spec, ca_file=rabbitmq_server.pki.wrong_ca_cert)

    assert await trusted.deliver(Batch.of([outbox("p", 1, "a")])) == [DELIVERED]
    assert isinstance((await untrusted.deliver(Batch.of([outbox("p", 2, "a")])))[0], Retry)
    assert not untrusted.ready()
    assert [m.message_id for m in await drain(rabbitmq_server.url, queue)] == ["p:outbox:1"]


async def test_a_ca_bundle_rotated_to_garbage_keeps_the_last_good_ca_for_the_reconnect(
    rabbitmq_server: RabbitServer, names: tuple[str, str], started, tmp_path: Path
) -> None:
    """The CA file is watched like every other sink's: a bundle that no longer parses is not
    taken, so the next connection still verifies with the last good CA (read from the path at
    each connect, as before, it failed: the broker unreachable until the file was mended)."""
    exchange, queue = names
    await declare(rabbitmq_server.url, exchange, {queue: "ev"})
    bundle = tmp_path / "ca.crt"
    bundle.write_bytes(rabbitmq_server.pki.ca_cert.read_bytes())
    watched = pem_file("--amqp-ca-file", bundle)
    own = AmqpOptions(ca_file=bundle, ca=watched)
    spec = parse_sink_spec(f"amqp:{rabbitmq_server.tls_url}?exchange={exchange}&routing_key=ev")
    sink = await started(AmqpSink(spec, SinkOptions(own=own)))
    before = await sink.deliver(Batch.of([outbox("p", 1, "a")]))

    bundle.write_text("not a certificate\n")
    checked = watched.check()
    await sink.close()  # the next delivery connects afresh
    after = await sink.deliver(Batch.of([outbox("p", 2, "a")]))

    assert before == [DELIVERED]
    assert checked == "refused"
    assert after == [DELIVERED]
    assert [m.message_id for m in await drain(rabbitmq_server.url, queue)] == ["p:outbox:1", "p:outbox:2"]


async def test_the_client_baseline_publishes_the_bodies_to_the_keys_the_sink_would_use(
    rabbitmq_server: RabbitServer, names: tuple[str, str]
) -> None:
    """``relayd bench``'s amqp baseline: the same bodies, routing keys and ids, every one acked."""
    from relayd.bench.baselines.amqp import publish

    exchange, queue = names
    await declare(rabbitmq_server.url, exchange, {queue: "p.outbox.#"})
    batch = [outbox("p", seq, f"exe-{seq % 3}") for seq in range(1, 11)]
    query = f"exchange={exchange}&routing_key={{prefix}}.{{kind}}.{{target}}&heartbeat=30"
    spec = f"amqp:{rabbitmq_server.url}?{query}"

    acked = await publish(spec, [e.to_json() for e in batch], [e.ordering_key for e in batch], SinkOptions())

    assert acked == len(batch)
    got = await drain(rabbitmq_server.url, queue)
    assert [m.body for m in got] == [e.to_json() for e in batch]
    assert [m.message_id for m in got] == [e.id for e in batch]
    assert [m.routing_key for m in got] == [f"p.outbox.exe-{seq % 3}" for seq in range(1, 11)]


@pytest.mark.parametrize(
    ("target", "options", "message"),
    [
        ("amqp://guest:hunter2@127.0.0.1/?routing_key=k", {}, "--amqp-password-file"),
        ("amqp://127.0.0.1/?exchange=x", {}, "needs a routing key"),
        ("amqps://127.0.0.1/?routing_key=k&no_verify_ssl=1", {}, "unknown parameter 'no_verify_ssl'"),
        ("amqp://broker.example/?routing_key=k", {}, "needs --allow-plaintext"),
        (
            "amqp://broker.example/?routing_key=k",
            {"has_password_file": True},
            "refusing to send amqp credentials",
        ),
        ("http://127.0.0.1/?routing_key=k", {}, "amqp:// or amqps://"),
        ("amqp://127.0.0.1/?routing_key=k&heartbeat=soon", {}, "heartbeat"),
    ],
    ids=[
        "password-in-url",
        "no-routing-key",
        "tls-off-switch",
        "plaintext-remote",
        "password-plaintext",
        "scheme",
        "heartbeat",
    ],
)
def test_bad_specs_are_one_line_config_errors_without_the_password(
    target: str, options: dict[str, bool], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_amqp_target(target, **options)

    assert "hunter2" not in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_target_parses_vhost_user_exchange_and_defaults() -> None:
    parsed = parse_amqp_target("amqps://relay@mq.example/prod%2Fa?exchange=ev&routing_key={target}")

    assert (parsed.tls, parsed.host, parsed.port, parsed.vhost, parsed.username) == (
        True, "mq.example", 5671, "prod/a", "relay",
    )  # fmt: skip
    assert (parsed.exchange, parsed.routing_key) == ("ev", "{target}")
    assert parse_amqp_target("amqp://127.0.0.1?routing_key=k").vhost == "/"
    assert parse_amqp_target("amqp://127.0.0.1?routing_key=k").exchange == ""


@pytest.mark.usefixtures("restore_logging")
def test_without_the_extra_naming_the_sink_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """aiormq missing (simulated: a None entry in sys.modules makes its import fail)."""
    monkeypatch.setitem(sys.modules, "aiormq", None)

    with pytest.raises(ConfigError, match=r"pip install 'relayd\[amqp\]'"):
        resolve_sink("amqp:amqp://127.0.0.1/?routing_key=k", SinkOptions())
    result = CliRunner().invoke(
        app,
        [
            "sweep",
            "--once",
            "--sink",
            "amqp:amqp://127.0.0.1/?routing_key=k",
            "--redis-url",
            "redis://127.0.0.1:1",
        ],
        env={"RELAYD_LOG_FORMAT": "json"},
    )

    assert result.exit_code == 2
    assert missing_extra("amqp", "amqp", needs="aiormq") in result.output
    assert len(result.output.strip().splitlines()) == 1
