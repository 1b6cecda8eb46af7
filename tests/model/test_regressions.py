"""The broken promises where features meet, as the model found them: each a schedule of
``model.machine.Schedules``, replayed step by step; its teardown drains and checks every
invariant (``model.invariants``).

Each fails on the code before its fix.
"""

from __future__ import annotations

from model.machine import Schedules


def test_case_2_a_lease_retaken_by_the_same_replica_does_not_revive_its_old_pass() -> None:
    """A's lease expires between two passes and A takes it again: the pass of its first term
    must not send in the second (its sweeper of term 1 sent e1 while A held term 2)."""
    state = Schedules()
    state.first_replica_active()
    state.run_pass(replica="A")
    state.advance(seconds=7.0)
    state.commit_outbox(to="t1")
    state.keeper(replica="A")
    state.teardown()


def test_case_2_a_hung_pass_resumed_in_a_new_term_sends_nothing_more() -> None:
    """A's sink call hangs past its lease; B delivers and acks X, Y and W; A takes the lease
    again and its call returns: nothing of its old pass is sent again, after W."""
    state = Schedules()
    state.first_replica_active()
    state.commit_outbox(to="t1")
    state.commit_outbox(to="t1")
    state.answer_entry(back=1, answers=["retry"])
    state.hang_next_request(replica="A")
    state.run_pass(replica="A")
    state.advance(seconds=7.0)
    state.keeper(replica="B")
    state.run_pass(replica="B")
    state.commit_outbox(to="t1")
    state.run_pass(replica="B")
    state.advance(seconds=7.0)
    state.keeper(replica="A")  # its renewal fails: lost
    state.keeper(replica="A")  # taken again, while its old pass still waits on the sink
    state.answer_hung_request()
    state.run_pass(replica="A")
    state.teardown()


def test_case_4_a_held_timer_the_engine_cancelled_is_not_sent_again() -> None:
    state = Schedules()
    state.first_replica_active()
    state.arm_timer(execution="x1", in_s=-1.0)
    state.answer_entry(answers=["retry"], back=0)
    state.run_pass(replica="A")
    state.cancel_timer(execution="x1")
    state.advance(seconds=2.0)
    state.run_pass(replica="A")
    state.teardown()


def test_case_4_a_held_timer_the_engine_moved_later_fires_at_its_new_time() -> None:
    state = Schedules()
    state.first_replica_active()
    state.arm_timer(execution="x1", in_s=-1.0)
    state.answer_entry(answers=["retry"], back=0)
    state.run_pass(replica="A")
    state.arm_timer(execution="x1", in_s=20.0)
    state.advance(seconds=2.0)
    state.run_pass(replica="A")
    state.teardown()


def test_case_3_spawns_beyond_the_window_hold_back_events_to_their_children() -> None:
    """Five spawns, a window of four: the event to the fifth child went before its spawn."""
    state = Schedules()
    state.first_replica_active()
    for _ in range(5):
        state.commit_spawn()
    state.commit_to_child(back=0)
    state.run_pass(replica="A")
    state.teardown()


def test_case_5_entries_below_the_frontier_keep_their_order() -> None:
    """The engine's counter is reset: the entries committed after it are found by the
    reconcile scan in hash order, a later one of the target first."""
    state = Schedules()
    state.first_replica_active()
    for _ in range(6):
        state.commit_outbox(to="t1")
    state.run_pass(replica="A")
    state.run_pass(replica="A")  # nothing held when the counter is reset
    assert all(replica.quiet for replica in state.world.replicas.values())
    state.reset_counter()
    assert state.world.run(state.world.client.get(state.world.ks.outbox_seq)) == b"0"
    for _ in range(12):
        state.commit_outbox(to="t2")
    state.run_pass(replica="A")
    state.teardown()


def test_case_9_a_counter_jump_does_not_stall_new_entries() -> None:
    state = Schedules()
    state.first_replica_active()
    state.commit_outbox(to="t1")
    state.run_pass(replica="A")
    state.jump_counter(by=100_000)
    state.commit_outbox(to="t1")
    state.teardown()


def test_case_9_a_counter_jump_before_the_first_read_does_not_stall_new_entries() -> None:
    """The counter jumped before the reader's first read: more new entries than one read takes,
    all of them far above the frontier; the hash's size sends the reader to them."""
    state = Schedules()
    state.first_replica_active()
    state.jump_counter(by=100_000)
    for _ in range(5):
        state.commit_outbox(to="t1")
    state.teardown()


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


def test_case_10_the_same_refusal_from_every_target_dead_letters_nothing() -> None:
    """The sink answers 401 (about itself) to every entry, for two targets at once: an outage of
    the sink, not two poison entries; nothing is dead-lettered, all is delivered once it recovers."""
    state = Schedules()
    state.first_replica_active()
    state.commit_outbox(to="t1")
    state.commit_outbox(to="t2")
    state.sink_refuses(refusing=True)
    state.run_pass(replica="A")
    state.advance(seconds=7.0)
    state.keeper(replica="A")
    state.run_pass(replica="A")
    state.sink_refuses(refusing=False)
    state.teardown()


def test_case_7_entries_not_sent_for_the_lease_do_not_open_the_breaker() -> None:
    """Three times the sink finds the lease may have expired before sending anything: the heads
    of two targets left unsent each time (six entries, enough to open it as failures). Not the
    sink's failure: its breaker stays closed."""
    state = Schedules()
    state.first_replica_active()
    for to in ("t1", "t2", "t1", "t2"):
        state.commit_outbox(to=to)
    for _ in range(3):
        state.lease_lapses_in_request(replica="A", sent=0)
        state.run_pass(replica="A")
    state.teardown()


def test_case_7_an_entry_not_sent_for_the_lease_is_charged_no_attempt() -> None:
    """The sink sends one entry and leaves the next unsent for the lease: no attempt is charged
    for it (none was made)."""
    state = Schedules()
    state.first_replica_active()
    state.commit_outbox(to="t1")
    state.commit_outbox(to="t2")
    state.lease_lapses_in_request(replica="A", sent=1)
    state.run_pass(replica="A")
    state.teardown()


def test_case_1_a_poison_entry_inside_a_batch_is_found_and_the_rest_delivered() -> None:
    """Requests of 3 to a receiver that refuses a request whole for one bad entry: the entry
    keeps failing (permanent), its request is split until it is found; it alone is parked and
    every other entry is delivered, in order (the model's batching action came after the fix:
    no schedule of the code before it)."""
    state = Schedules()
    state.first_replica_active()
    state.batch_requests(size=3)
    for target in ("t1", "t2", "t1", "t2", "t1", "t2"):
        state.commit_outbox(to=target)
    state.answer_entry(back=3, answers=["permanent"] * 8)
    state.run_pass(replica="A")
    state.run_pass(replica="A")
    state.teardown()


def test_case_3_a_spawn_committed_while_the_pass_delivers_holds_back_its_child_s_event() -> None:
    """Found by ``make model``: the pass's spawn request hangs; meanwhile a spawn and an event to
    its child are committed. The spawn lane had read before that spawn, so only the outbox read
    saw the event: it reached the child before its spawn."""
    state = Schedules()
    state.first_replica_active()
    state.commit_outbox(to="t1")
    for _ in range(4):
        state.commit_spawn()
    state.hang_next_request(replica="A")
    for _ in range(3):
        state.commit_spawn()
    state.reset_counter()
    state.keeper(replica="A")
    state.run_pass(replica="A")
    state.commit_spawn()
    state.commit_to_child(back=0)
    state.teardown()


def test_case_8_a_held_timer_waits_again_when_redis_s_clock_steps_back() -> None:
    """Found by ``make model``: a due timer held while its sink was down (no attempt, no wait)
    was sent by the breaker's probe after Redis's clock stepped back 30 s, before its fire_at
    by that clock."""
    state = Schedules()
    state.first_replica_active()
    for _ in range(4):
        state.commit_spawn()
    state.lose_lease()
    state.keeper(replica="B")
    state.sink_down(down=True)
    state.arm_timer(execution="x1", in_s=-1.0)
    state.run_pass(replica="B")
    state.step_redis_clock(seconds=-30.0)
    state.teardown()


def test_case_1_a_permanent_answer_inside_a_batch_parks_only_its_own_entry() -> None:
    """Requests of up to 3 to a receiver that takes or refuses each whole; the second spawn
    is answered 'permanent' once, a fourth spawn comes after: only an entry that was refused
    itself may be parked (here the fourth, never refused, was dead-lettered). Found by a long
    ``make model`` run; present since the batching action came in (635d8a5 fails it too)."""
    state = Schedules()
    state.first_replica_active()
    state.purge()
    state.batch_requests(size=0)
    state.commit_spawn()
    state.commit_spawn()
    state.commit_spawn()
    state.purge()
    state.batch_requests(size=0)
    state.sink_down(down=False)
    state.batch_requests(size=3)
    state.answer_entry(answers=["permanent"], back=1)
    state.commit_spawn()
    state.run_pass(replica="A")
    state.teardown()


def test_case_5_a_counter_reset_then_jumped_keeps_the_order_below_the_frontier() -> None:
    """The counter is reset with the outbox drained, two events to t1 reuse seqs 1 and 2, then
    the counter jumps: the reader, its frontier past seq 1, must not deliver seq 2 before seq 1."""
    state = Schedules()
    state.first_replica_active()
    state.commit_outbox(to="t1")
    state.run_pass(replica="A")
    state.lose_lease()
    state.reset_counter()
    state.commit_outbox(to="t1")
    state.commit_outbox(to="t1")
    state.jump_counter(by=40)
    state.teardown()


def test_case_7_an_attempt_charged_by_the_replica_that_sent_is_not_blamed_on_the_one_that_did_not() -> None:
    """A loses its lease and B takes it; A's next request hangs and its lease lapses with nothing
    sent; B sends the spawn and its answer is a retry. B's attempt is B's: the model once blamed
    it on A, whose unsent entry shares the attempt record (the engine charged nothing for A)."""
    state = Schedules()
    state.first_replica_active()
    state.commit_spawn()
    state.lose_lease()
    state.hang_next_request(replica="A")
    state.keeper(replica="B")
    state.lease_lapses_in_request(replica="A", sent=0)
    state.answer_entry(answers=["retry"], back=0)
    state.run_pass(replica="A")
    state.run_pass(replica="B")
    state.teardown()


def test_case_11_a_timer_replayed_after_the_engine_cancelled_it_stays_parked() -> None:
    """x1's timer is refused and parked; the engine arms x1's timer again and cancels it; an
    operator replays the dead letters. The parked timer is stale now: the replay once put it
    back and it fired after its cancellation."""
    state = Schedules()
    state.first_replica_active()
    state.sink_refuses(refusing=True)
    state.arm_timer(execution="x1", in_s=-1.0)
    state.run_pass(replica="A")
    state.arm_timer(execution="x1", in_s=-1.0)
    state.cancel_timer(execution="x1")
    state.replay()
    state.teardown()


def test_case_7_a_charge_for_a_request_to_a_sink_that_is_down_is_the_sender_s() -> None:
    """A's request lapses with the spawn unsent; then the sink is down and B, holding the lease
    now, sends it: the request fails whole, unanswered, and B charges the attempt. That charge is
    B's: the model once counted only answered sends and blamed it on A's unsent entry."""
    state = Schedules()
    state.lease_lapses_in_request(replica="A", sent=0)
    state.hang_next_request(replica="A")
    state.keeper(replica="A")
    state.commit_spawn()
    state.run_pass(replica="A")
    state.sink_down(down=True)
    state.lose_lease()
    state.keeper(replica="B")
    state.run_pass(replica="B")
    state.teardown()


def test_case_12_a_replica_whose_lease_key_was_lost_sends_nothing_after_the_new_holder() -> None:
    """The lease key is lost and B takes it; B sends e1 and e2 (its request hangs). A, its own
    deadline still ahead, once read and sent e1 again, after B's e2 (its request lapsed after one
    entry): t2's last copies out of order. A's read now checks the lease and sends nothing."""
    state = Schedules()
    state.first_replica_active()
    state.commit_outbox(to="t2")
    state.commit_outbox(to="t2")
    state.hang_next_request(replica="B")
    state.lose_lease()
    state.keeper(replica="B")
    state.run_pass(replica="B")
    state.lease_lapses_in_request(replica="A", sent=1)
    state.run_pass(replica="A")
    state.teardown()


def test_case_3_a_spawn_committed_while_the_pass_reads_holds_back_its_child_s_event() -> None:
    """A spawn and an event to its child are committed after the outbox read's round-trip read
    the spawns counter and before the reconcile scan that then finds the event: the scan's
    event waits for its spawn (it went out first, unchecked)."""
    state = Schedules()
    state.first_replica_active()
    state.during_pass(after=0, replica="A", what="spawn_and_child_event")
    state.purge()
    state.during_pass(after=4, replica="A", what="spawn_and_child_event")
    state.teardown()


def test_the_model_knows_an_entry_parked_and_replayed_within_one_pass_was_parked() -> None:
    """The model's own bookkeeping: e2 is refused for good and parked while the pass reads
    ahead, and a replay that lands in that read-ahead's round-trip puts it back before the pass
    ends. Its copy after e3-e6 is what a replay means, not an order broken: the model learns
    it was parked from its new seq (``World.replayed``), not only at a pass's end."""
    state = Schedules()
    state.first_replica_active()
    state.during_pass(after=0, replica="A", what="event")
    for _ in range(5):
        state.commit_outbox(to="t1")
    state.answer_entry(answers=["permanent", "retry"], back=4)
    state.during_pass(after=2, replica="A", what="replay")
    state.teardown()
