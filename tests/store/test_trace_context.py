"""``store`` records the commit's W3C trace context with each outbox and spawn entry, and
harel's own store, relay and worker read such entries as they read their own."""

from __future__ import annotations

import orjson
from harel import definition_from_dsl
from harel.engine.durable import DurableRunner
from harel.engine.execution import Execution as HarelExecution
from harel.engine.execution import Status as HarelStatus
from harel.engine.store import RedisStore as HarelRedisStore
from harel.engine.store import StoreConflict as HarelStoreConflict
from harel.spec.states import Event as HarelEvent
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanContext

from store import Event, Execution, RedisStore, Status

TRACER = TracerProvider().get_tracer("tests.store")
SOURCE = """
event Go {}
event A {}
machine flow {
  initial Idle
  state Idle {}
  orthogonal Fork {
    state RegionA {
      initial WaitA
      state WaitA {}
      final DoneA success
      from WaitA to DoneA on A
    }
  }
  final Finished success
  final Failed failed
  from Idle to Fork on Go
  from Fork join all to Finished else to Failed
}
"""


def _traceparent(context: SpanContext) -> str:
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def test_a_commit_inside_a_span_records_its_context_and_harel_reads_the_entries(sync_client, prefix) -> None:
    ours = RedisStore(sync_client, prefix=prefix)
    exe = Execution(definition_id="d", status=Status.RUNNING)
    with TRACER.start_as_current_span("commit") as span:
        ours.commit(exe, [("t1", Event(kind="Ping", data={"n": 1}))], spawns=(("c1", "r", {"x": 1}),))
    outside = Execution(definition_id="d", status=Status.RUNNING)
    ours.commit(outside, [(None, Event(kind="Pong"))])

    values = {key: _by_seq(sync_client.hgetall(f"{prefix}:{key}")) for key in ("outbox", "spawns")}
    expected = {"traceparent": _traceparent(span.get_span_context())}
    assert [v.get("tc") for v in values["outbox"]] == [expected, None]
    assert [v.get("tc") for v in values["spawns"]] == [expected]
    assert sorted(values["outbox"][1]) == ["ct", "e", "t"]  # outside a span: harel's and the commit time
    harel = HarelRedisStore(sync_client, prefix=prefix)
    assert [(e.target_id, e.event.kind, e.event.data) for e in harel.pending_outbox()] == [
        ("t1", "Ping", {"n": 1}),
        (None, "Pong", {}),
    ]
    assert [(s.parent_id, s.child_id, s.context) for s in harel.pending_spawns()] == [
        (exe.id, "c1", {"x": 1})
    ]


def test_a_tracestate_is_recorded_too(sync_client, prefix) -> None:
    from opentelemetry.trace import NonRecordingSpan, TraceFlags, TraceState, use_span

    context = SpanContext(
        0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1), trace_state=TraceState([("ro", "1")])
    )
    with use_span(NonRecordingSpan(context)):
        RedisStore(sync_client, prefix=prefix).commit(
            Execution(definition_id="d", status=Status.RUNNING), [(None, Event(kind="K"))]
        )

    (value,) = sync_client.hvals(f"{prefix}:outbox")
    assert orjson.loads(value)["tc"] == {"traceparent": _traceparent(context), "tracestate": "ro=1"}


def _by_seq(rows: dict[bytes, bytes]) -> list[dict[str, object]]:
    return [orjson.loads(rows[field]) for field in sorted(rows, key=int)]


def test_harels_relay_delivers_what_our_store_committed_inside_a_span(sync_client, prefix) -> None:
    """harel's runner on harel's own store forks a child; our store then commits, inside a span,
    the child's event; harel's relay (``recover``: its drain of the outbox) reads the traced
    entry and delivers it, and the execution completes, the outbox left empty."""
    definition = definition_from_dsl(SOURCE, "flow")
    harels = HarelRedisStore(sync_client, prefix=prefix)
    runner = DurableRunner(harels, {definition.id: definition}, clock=lambda: 1_000.0, execution="inline")
    exe = runner.create(definition.id)
    (child,) = runner.process(exe.id, HarelEvent(kind="Go")).children
    ours = RedisStore(
        sync_client,
        prefix=prefix,
        execution_model=HarelExecution,
        event_model=HarelEvent,
        conflict_error=HarelStoreConflict,
    )

    with TRACER.start_as_current_span("producer") as span:
        ours.commit(ours.load(exe.id), [(child, HarelEvent(kind="A"))])
    (traced,) = _by_seq(sync_client.hgetall(f"{prefix}:outbox"))
    runner.recover(definition.id)
    done = harels.load(exe.id)

    assert traced["tc"] == {"traceparent": _traceparent(span.get_span_context())}
    assert (done.status, done.outcome, done.active_path) == (HarelStatus.DONE, "success", "Finished")
    assert harels.pending_outbox() == []
