"""harel's transport wire format, pure: the event JSON equals harel's own, byte for byte."""

from __future__ import annotations

from typing import Any

import pytest
from harel.engine.core import timeout_event
from harel.spec.states import Event as HarelEvent

from relayd.sinks.base import DELIVERED, Retry
from relayd.sinks.harel.wire import PublishPlan, apply_replies, event_json, timeout_event_json
from relayd.sinks.per_key import HELD_BACK

EVENTS: list[dict[str, Any]] = [
    {"id": "e1", "kind": "Go", "data": {"n": 1, "x": 1 / 3, "s": "é", "nested": {"l": [1, None, True]}}},
    {"id": "e2", "kind": "Go"},
    {"id": "e3", "kind": "Go", "created_time": None, "received_time": None, "data": {}},
    {"id": "e4", "kind": "Go", "data": {"big": 2**70, "tiny": 5e-324, "huge": 1e300, "neg": -0.0}},
    {"id": "e5", "kind": "Go", "extra": "dropped", "data": {"k": "v"}},
    {"id": "e6", "kind": "Go", "created_time": "2024-05-01T12:00:00+00:00"},
    {"id": "e7", "kind": "Go", "received_time": "2024-05-01T14:00:00.5+02:00", "data": {"a": 1}},
    {"id": "e8", "kind": "Go", "data": {"ctl": '\u0001\n\t"\\', "emoji": "\U0001f600"}},
]


@pytest.mark.parametrize("event", EVENTS, ids=[e["id"] for e in EVENTS])
def test_event_json_is_harels_event_json(event: dict[str, Any]) -> None:
    """What harel's relay queues for an event it loaded: its Event model, dumped again."""
    expected = HarelEvent.model_validate(event).model_dump_json().encode()

    assert event_json(event) == expected


def test_an_event_without_id_gets_a_fresh_one_as_in_harel() -> None:
    """harel's Event mints a hex id when there is none; so does the wire event."""
    queued = HarelEvent.model_validate_json(event_json({"kind": "Go"}))

    assert (queued.kind, len(queued.id)) == ("Go", 32)


@pytest.mark.parametrize(
    "event",
    [{"id": "x", "kind": 7}, {"id": "x", "kind": "Go", "data": "not an object"}, {"id": 3, "kind": "Go"}, []],
    ids=["kind-not-a-string", "data-not-an-object", "id-not-a-string", "not-an-object"],
)
def test_an_event_harel_refuses_is_refused(event: object) -> None:
    """The same events harel's Event refuses raise a ValueError (pydantic's ValidationError)."""
    with pytest.raises(ValueError, match="validation error"):
        HarelEvent.model_validate(event)
    with pytest.raises(ValueError, match="validation error"):
        event_json(event)


@pytest.mark.parametrize("fire_at", [1_700_000_000.0, 1_700_000_123.1, 0.5, 1e16, 123.456789012345])
def test_timeout_event_json_is_harels_timeout_event(fire_at: float) -> None:
    """Id (``str(float)``) and payload (the JSON float) exactly as harel's own ``timeout_event``."""
    expected = timeout_event("exe-1", "root.wait", fire_at).model_dump_json().encode()

    assert timeout_event_json("exe-1", "root.wait", fire_at) == expected


def test_a_plan_groups_by_target_in_batch_order_and_reads_or_gives_priorities() -> None:
    """Script arguments: prefix, mode, then per group its id, priority, count and payloads."""
    plan = PublishPlan("P")
    for index, group in enumerate(["a", "b", "a"]):
        plan.add(index, group, f"e{index}".encode())

    assert plan.script_args(None) == ["P", "read", "a", 0, 2, b"e0", b"e2", "b", 0, 1, b"e1"]
    assert plan.script_args({"a": 3}) == ["P", "given", "a", 3, 2, b"e0", b"e2", "b", 0, 1, b"e1"]


def test_a_stopped_group_takes_no_more_entries() -> None:
    """After an entry of a group is not published, its later entries of the batch are not either."""
    plan = PublishPlan("P")
    plan.add(0, "a", b"e0")
    plan.stop("a")

    assert not plan.add(1, "a", b"e1")
    assert plan.add(2, "b", b"e2")
    assert [p.indexes for p in plan.groups.values()] == [[0], [2]]


def test_replies_map_to_each_groups_entries() -> None:
    """1: all Delivered; an error: the first Retry with the reason, the rest held back."""
    plan = PublishPlan("P")
    for index, group in enumerate(["a", "b", "a", "b"]):
        plan.add(index, group, b"{}")
    outcomes: list[Any] = [None] * 4

    apply_replies(plan, [1, b"WRONGTYPE Operation against a key"], outcomes)

    assert outcomes[0] == outcomes[2] == DELIVERED
    assert outcomes[1] == Retry(error="harel transport refused the group (WRONGTYPE Operation against a key)")
    assert outcomes[3] == Retry(error=HELD_BACK)
