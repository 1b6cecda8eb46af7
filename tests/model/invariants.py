"""What the README promises, checked on the ledger and on Redis after a schedule's final drain.

Each check returns the violations it found, one line each; none is the pass.

- ``nothing_lost``: every entry the engine committed (and every timer it left armed and due)
  was delivered, or is parked as a dead letter, or an operator purged it; nothing due is left in
  Redis.
- ``key_order``: the last copies of one key arrive in seq order (pairs committed in seq order;
  entries that were ever dead letters are left out: parking one lets its key move on. One is
  known parked when a pass ends with it parked, or when it reached the receiver again under a
  replay's new seq).
- ``none_parked_innocent``: every entry ever parked was refused itself at least once (never
  only for sharing a request with a refused entry: ``World.batched``).
- ``spawn_first``: a spawn reaches the sink before any event to its child committed after it.
- ``timers_honest``: no timer is delivered after the engine cancelled or moved it, nor before its
  ``fire_at`` by Redis's clock.
- ``terms``: no pass sends for a lease term its replica no longer holds, and no attempt record
  is left for an outbox entry or spawn that is gone.
- whole-sink outages are checked while they happen (``World._observed_pass``): a sink down, or
  refusing every entry with the same answer about itself from several targets at once,
  dead-letters nothing; entries a sink left unsent because the lease may have expired neither
  open its breaker nor are charged an attempt. So are pauses:
  nothing of a paused scope is sent (so no attempt is charged) or dead-lettered by a pass that
  started at least one pause-watch period after the pause (``World.paused``).
"""

from __future__ import annotations

from collections import defaultdict

from model.world import Receipt, World, timer_id


def accepted(world: World) -> list[Receipt]:
    return [r for r in world.receiver.ledger if r.answer == "ok"]


def nothing_lost(world: World, dead: set[str], live: dict[str, int]) -> list[str]:
    delivered = {r.id for r in accepted(world)}
    out = []
    for entry in world.committed:
        gone = entry.id in world.purged or entry.id in world.overwritten
        if entry.id not in delivered and entry.id not in dead and not gone:
            out.append(f"lost: {entry.kind} {entry.id} (seq {entry.seq}) never delivered nor parked")
    now = world.clock.now()
    for state in world.timers.values():
        if state.fire_at is None or state.fire_at > now:
            continue
        tid = timer_id(state.execution, state.path, state.fire_at)
        if tid not in delivered and tid not in dead and tid not in world.purged:
            out.append(f"lost: timer {tid} due and never delivered nor parked")
    for what, count in live.items():
        if count:
            out.append(f"left forever: {count} entries still in {what} after the final drain")
    return out


def key_order(world: World) -> list[str]:
    last: dict[str, int] = {}
    for position, receipt in enumerate(accepted(world)):
        if receipt.kind == "outbox":
            last[receipt.id] = position
    by_key: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for entry in world.committed:
        skip = entry.id in world.ever_dead or entry.id in world.overwritten
        if entry.kind == "outbox" and entry.key is not None and not skip and entry.id in last:
            by_key[entry.key].append((entry.seq, last[entry.id], entry.id))
    out = []
    for key, entries in by_key.items():
        # Commit order is list order; only pairs whose seqs agree with it have an order to keep.
        for i, (seq_a, pos_a, id_a) in enumerate(entries):
            for seq_b, pos_b, id_b in entries[i + 1 :]:
                if seq_a < seq_b and pos_a > pos_b:
                    out.append(f"order: {key}: last copy of {id_a} (seq {seq_a}) after {id_b} (seq {seq_b})")
    return out


#: A receiver's answers about an entry itself (``in_refused_request``: refused with another).
_OWN_FAILURES = frozenset({"retry", "retry_after", "permanent", "refused"})


def none_parked_innocent(world: World) -> list[str]:
    """An entry parked as a dead letter was refused itself at least once: never only for
    sharing a request with another entry."""
    own = {r.id for r in world.receiver.ledger if r.answer in _OWN_FAILURES}
    innocent = sorted(world.ever_dead - own)
    return [f"parked innocent: {entry_id} was never refused itself" for entry_id in innocent]


def spawn_first(world: World) -> list[str]:
    first: dict[tuple[str, str], int] = {}
    for position, receipt in enumerate(accepted(world)):
        first.setdefault((receipt.kind, receipt.id), position)
    spawned = {e.id: e for e in world.committed if e.kind == "spawn"}
    out = []
    for entry in world.committed:
        if entry.kind != "outbox" or entry.key not in spawned:
            continue
        spawn = spawned[entry.key]
        if spawn.step > entry.step or spawn.id in world.ever_dead or spawn.id in world.purged:
            continue
        event_at = first.get(("outbox", entry.id))
        spawn_at = first.get(("spawn", spawn.id))
        if event_at is not None and (spawn_at is None or spawn_at > event_at):
            out.append(f"spawn after event: {entry.id} reached {entry.key} before its spawn")
    return out


def timers_honest(world: World) -> list[str]:
    out = []
    for receipt in world.receiver.ledger:
        if receipt.kind != "timer":
            continue
        retired = world.retired_timers.get(receipt.id)
        if retired is not None and receipt.step > retired:
            out.append(f"timer {receipt.id} sent at step {receipt.step}, cancelled or moved at {retired}")
        fire_at = world.armed_timers.get(receipt.id)
        if fire_at is not None and receipt.at < fire_at:
            out.append(f"timer {receipt.id} sent at {receipt.at}, before its fire_at {fire_at}")
    return out


def terms(world: World, stray_attempts: int) -> list[str]:
    out = [
        f"replica {r.replica} sent {r.kind} {r.id} at step {r.step} from term {r.term}"
        f" while holding term {r.holder_term}"
        for r in world.receiver.ledger
        if r.term and r.term != r.holder_term
    ]
    if stray_attempts:
        out.append(f"{stray_attempts} attempt record(s) left for entries that are gone")
    return out


async def check(world: World) -> list[str]:
    """Every invariant, after ``World.drain``."""
    client, ks = world.client, world.ks
    world.ever_dead |= world.replayed()
    dead = await world.dead_ids()
    live = {
        "the outbox": int(await client.hlen(ks.outbox)),
        "the spawns": int(await client.hlen(ks.spawns)),
        "the due timers": int(await client.zcount(ks.timers, "-inf", world.clock.now())),
    }
    stray = 0
    for kind, live_key in (("spawn", ks.spawns), ("outbox", ks.outbox)):
        for ref in await client.hkeys(world.relay_keys.attempts(kind)):
            stray += not await client.hexists(live_key, ref)
    # Timers are left out: the record of a held timer the engine moved while its replica lost the
    # lease stays behind (harmless: no read returns that id again).
    return [
        *world.violations,
        *nothing_lost(world, dead, live),
        *key_order(world),
        *none_parked_innocent(world),
        *spawn_first(world),
        *timers_honest(world),
        *terms(world, stray),
    ]
