"""The sink batch contract: a columnar outbox window and a plain list answer alike."""

from __future__ import annotations

import json

import orjson
import pytest

from relayd.envelope.batch import Batch, EnvelopeList
from relayd.envelope.decode import outbox_envelope, outbox_envelopes, spawn_envelope
from relayd.envelope.outbox_window import OutboxWindow
from store.backlog import RawEntry


def _outbox_entries(count: int) -> list[RawEntry]:
    return [
        RawEntry(
            str(n),
            n,
            json.dumps(
                {
                    "t": f"t{n % 2}" if n % 3 else None,
                    "e": json.dumps({"id": f"e{n}", "kind": "K", "x": n / 3}),
                }
            ).encode(),
        )
        for n in range(1, count + 1)
    ]


def _spawn(seq: int, child: str = "b"):
    value = orjson.dumps({"p": "a", "c": child, "r": "root", "x": {}})
    return spawn_envelope(RawEntry(str(seq), seq, value), prefix="p", attempt=1, relayed_at=0.0)


def test_a_window_answers_what_its_envelopes_answer_as_a_list():
    """ids, keys, render and kind read the window's columns; a list of the same envelopes agrees."""
    entries = _outbox_entries(5)
    window, _, _ = outbox_envelopes(entries, prefix='pre"fix', attempt=1, relayed_at=0.0)
    stamp = 1_700_000_000.25
    window.stamp(stamp)
    envelopes = [outbox_envelope(e, prefix='pre"fix', attempt=1, relayed_at=stamp) for e in entries]
    plain = Batch.of(envelopes)

    assert isinstance(window, Batch)
    assert window.render() == [env.to_json() for env in envelopes] == plain.render()
    assert window.ids() == [env.id for env in envelopes] == plain.ids()
    assert window.keys() == [env.ordering_key for env in envelopes] == plain.keys()
    assert window.kind == plain.kind == "outbox"


def test_keys_hands_out_a_copy_the_sink_may_change():
    window, _, _ = outbox_envelopes(_outbox_entries(3), prefix="p", attempt=1, relayed_at=0.0)

    window.keys().clear()

    assert window.targets == ["t1", "t0", None]


def test_of_keeps_a_batch_and_wraps_a_list_without_copying_it():
    window, _, _ = outbox_envelopes(_outbox_entries(2), prefix="p", attempt=1, relayed_at=0.0)
    envelopes = [_spawn(1), _spawn(2, "c")]

    wrapped = Batch.of(envelopes)

    assert Batch.of(window) is window
    assert isinstance(wrapped, EnvelopeList)
    assert wrapped.kind == "spawn"
    assert list(wrapped) == envelopes
    assert wrapped[1] is envelopes[1]
    assert wrapped.keys() == ["b", "c"]
    envelopes.append(_spawn(3, "d"))
    assert len(wrapped) == 3  # the list itself, not a copy (equal elements would pass for a copy)


def test_a_slice_of_a_list_batch_is_a_batch_of_the_same_kind():
    batch = Batch.of([_spawn(n) for n in range(1, 6)])

    part = batch[1:3]

    assert isinstance(part, EnvelopeList)
    assert part.kind == "spawn"
    assert part.ids() == ["p:spawn:2", "p:spawn:3"]
    assert isinstance(OutboxWindow("p", 1, 0.0, [], [], [], [])[0:0], Batch)


def test_a_batch_holds_one_kind():
    """Mixed kinds, or no envelope and no kind, are refused; an empty batch with a kind is fine."""
    window, _, _ = outbox_envelopes(_outbox_entries(1), prefix="p", attempt=1, relayed_at=0.0)

    with pytest.raises(ValueError, match="one kind"):
        Batch.of([window[0], _spawn(9)])
    with pytest.raises(ValueError, match="one kind"):
        Batch.of([])
    assert len(Batch.of([], "timer")) == 0
