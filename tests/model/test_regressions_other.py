"""Issue 34's cases the model found whose fixes are on another branch (``fixes``): each a schedule
of ``model.machine.Schedules``, ``xfail`` (strict) until that branch is merged."""

from __future__ import annotations

import pytest
from model.machine import Schedules


@pytest.mark.xfail(strict=True, reason="fixed on branch fixes")
def test_case_6_replay_onto_a_live_seq_keeps_the_dead_letter() -> None:
    """e1 is parked at seq 1; the counter is reset and e2 committed at seq 1; a replay meets the
    live seq: e1's letter must stay parked (it was deleted: e1 lost)."""
    state = Schedules()
    state.first_replica_active()
    state.commit_outbox(to="t1")
    state.answer_entry(back=0, answers=["permanent"])
    state.run_pass(replica="A")
    state.reset_counter()
    state.commit_outbox(to="t2")
    state.replay()
    state.teardown()
