"""The build step of a pass: envelopes for entries as read, and dead letters for malformed ones.

``build_fresh`` turns one read (``RawEntry``s or ``RawTimer``s of one kind) into a
``FreshBatch`` stamped with the read's time, through the builders of ``relayd.envelope.decode``; an
entry no envelope can be built for becomes a ``Dead`` under the id ``relayd dlq list`` shows
(``dead_letter_id``). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from relayd.engine.fresh import FreshBatch
from relayd.engine.plan import Dead, Held
from relayd.envelope import Envelope, Kind
from relayd.envelope.decode import outbox_envelopes, spawn_envelope, timer_envelope
from relayd.envelope.stored import display_text
from store import MalformedEntry, RawEntry, RawTimer


def timer_ref(timer: RawTimer) -> str:
    """A timer's stable id: its Timeout event id, or a readable stand-in when malformed."""
    try:
        return timer_envelope(timer, prefix="", attempt=1, relayed_at=0.0).id
    except MalformedEntry:
        member = display_text(timer.member).replace("\x00", "\\x00")
        return f"timeout:{member}:{float(timer.fire_at)}"


def build_fresh(
    kind: Kind, prefix: str, raws: Sequence[RawEntry | RawTimer], now: float
) -> tuple[FreshBatch, list[Dead]]:
    """Envelopes (attempt 1, stamped ``now``) for ``raws``; malformed ones become dead letters."""
    failures: list[tuple[RawEntry | RawTimer, MalformedEntry]] = []
    if kind == "outbox":
        # The hot path of a drain: a window in one loop, into columns (``outbox_envelopes``).
        # A hash lane's reader returns entries only.
        entries = cast("Sequence[RawEntry]", raws)
        window, good, bad = outbox_envelopes(entries, prefix=prefix, attempt=1, relayed_at=now)
        # ``refs`` a copy of the window's fields: extending the batch extends both, once each.
        fresh = FreshBatch(window.fields[:], cast("list[RawEntry | RawTimer]", good), window)
        failures += bad
    else:
        fresh = FreshBatch()
        envelopes: list[Envelope] = []
        for raw in raws:
            try:
                if isinstance(raw, RawTimer):
                    envelope = timer_envelope(raw, prefix=prefix, attempt=1, relayed_at=now)
                    ref = envelope.id
                else:
                    envelope = spawn_envelope(raw, prefix=prefix, attempt=1, relayed_at=now)
                    ref = raw.field
            except MalformedEntry as exc:
                failures.append((raw, exc))
                continue
            fresh.refs.append(ref)
            fresh.raws.append(raw)
            envelopes.append(envelope)
        fresh.envelopes = envelopes
    return fresh, [_dead_letter(kind, prefix, raw, why, now) for raw, why in failures]


def dead_letter_id(prefix: str, kind: Kind, ref: str) -> str:
    """The id a dead letter is parked and logged under (the one ``relayd dlq list`` shows)."""
    return display_text(ref) if kind == "timer" else f"{prefix}:{kind}:{display_text(ref)}"


def _dead_letter(kind: Kind, prefix: str, raw: RawEntry | RawTimer, why: MalformedEntry, now: float) -> Dead:
    """A malformed entry on its way to the dead letters: no envelope could be built, so an empty
    one, named by the dead letter's id."""
    ref = timer_ref(raw) if isinstance(raw, RawTimer) else raw.field
    placeholder = Envelope(dead_letter_id(prefix, kind, ref), kind, prefix, 0, {})
    return Dead(Held(ref, raw, placeholder, now), why.reason, str(why))
