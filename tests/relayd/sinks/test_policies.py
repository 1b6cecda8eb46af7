"""Pure rules: Retry-After parsing, status classification, signatures, per-key grouping and hold-back,
routing-key templates."""

from __future__ import annotations

import asyncio
from email.utils import formatdate

import pytest

from relayd.envelope import Envelope
from relayd.sinks import DELIVERED, Outcome, Permanent, Retry
from relayd.sinks.per_key import HELD_BACK, deliver_per_key, group_by_key
from relayd.sinks.routing import fill, fill_all
from relayd.sinks.webhook.http_policy import classify_status, parse_retry_after, sign, verify

from .conftest import outbox

NOW_S = 1_750_000_000.0


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        ("0", 0.0),
        (" 120 ", 120.0),
        (formatdate(NOW_S + 45, usegmt=True), 45.0),
        (formatdate(NOW_S - 45, usegmt=True), 0.0),
        ("soon", None),
        ("-5", None),
        ("1.5", None),
    ],
    ids=["absent", "zero", "seconds", "date", "past-date", "garbage", "negative", "fraction"],
)
def test_retry_after_parses_seconds_and_http_dates(header: str | None, expected: float | None) -> None:
    """Delta seconds and HTTP-dates give seconds from now; anything else is ignored."""
    assert parse_retry_after(header, NOW_S) == expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (200, DELIVERED),
        (299, DELIVERED),
        (301, Permanent("http 301")),
        (400, Permanent("http 400")),
        (422, Permanent("http 422")),
        (408, Retry(error="http 408")),
        (425, Retry(error="http 425")),
        (429, Retry(error="http 429")),
        (500, Retry(error="http 500")),
        (599, Retry(error="http 599")),
    ],
    ids=lambda v: str(v) if isinstance(v, int) else "",
)
def test_status_classification(status: int, expected: Outcome) -> None:
    """2xx delivered; 408/425/429/5xx retried; everything else permanent."""
    assert classify_status(status, None, NOW_S) == expected


def test_signature_round_trip_and_tamper_detection() -> None:
    """verify accepts what sign made and rejects a changed body, timestamp or secret."""
    signature = sign(b"k", 1700, b'{"a":1}')

    assert signature.startswith("v1=")
    assert verify(b"k", "1700", b'{"a":1}', signature)
    assert not verify(b"k", "1701", b'{"a":1}', signature)
    assert not verify(b"k", "1700", b'{"a":2}', signature)
    assert not verify(b"j", "1700", b'{"a":1}', signature)
    assert not verify(b"k", "x", b'{"a":1}', signature)


def test_group_by_key_keeps_batch_order_and_separates_untargeted() -> None:
    """Same key → one group in batch order; each None-key envelope is its own group."""
    batch = [
        outbox("p", 1, "a"),
        outbox("p", 2, None),
        outbox("p", 3, "b"),
        outbox("p", 4, "a"),
        outbox("p", 5, None),
    ]

    assert group_by_key([e.ordering_key for e in batch]) == [[0, 3], [2], [1], [4]]


async def test_deliver_per_key_stops_a_key_at_its_first_failure() -> None:
    """After a Permanent or Retry, the later envelopes of that key are held back, unsent."""
    sent: list[str] = []
    failing: dict[str, Outcome] = {"p:outbox:1": Permanent("bad"), "p:outbox:3": Retry(error="later")}

    async def send_one(envelope: Envelope) -> Outcome:
        sent.append(envelope.id)
        await asyncio.sleep(0)
        return failing.get(envelope.id, DELIVERED)

    batch = [outbox("p", n, key) for n, key in enumerate(["a", "a", "a", "b", "b", "c"])]
    outcomes = await deliver_per_key(batch, send_one)

    assert outcomes == [
        DELIVERED,
        Permanent("bad"),
        Retry(error=HELD_BACK),
        Retry(error="later"),
        Retry(error=HELD_BACK),
        DELIVERED,
    ]
    assert sorted(sent) == ["p:outbox:0", "p:outbox:1", "p:outbox:3", "p:outbox:5"]


@pytest.mark.parametrize(
    ("template", "target", "expected"),
    [
        ("events.{prefix}.{kind}.{target}", "order-7", "events.stm.outbox.order-7"),
        ("events.{target}", None, "events._"),
        ("fixed", "order-7", "fixed"),
    ],
    ids=["all-placeholders", "no-target", "no-placeholder"],
)
def test_routing_templates_fill_target_kind_and_prefix(
    template: str, target: str | None, expected: str
) -> None:
    assert fill(template, target=target, kind="outbox", prefix="stm") == expected
    assert (
        fill_all(template, targets=[target, target], kind="outbox", prefixes=["stm", "stm"]) == [expected] * 2
    )


def test_a_target_that_reads_like_a_placeholder_is_kept_as_it_is() -> None:
    """``{kind}`` and ``{prefix}`` are filled before ``{target}``: a target's own text stays."""
    target = "a{prefix}b{kind}"

    assert fill("ev.{prefix}.{target}", target=target, kind="outbox", prefix="stm") == f"ev.stm.{target}"
    filled = fill_all("{kind}.{target}", targets=[target], kind="timer", prefixes=["stm"])
    assert filled == [f"timer.{target}"]
