"""The console's pure parts: error signatures, filters, page tokens, groups, rates, CLI equivalents."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest

from relayd.console.commands import MAX_IDS_SHOWN, purge_command, replay_command
from relayd.console.filters import DeadLetterFilter, FilterInvalid
from relayd.console.groups import group_dead_letters, reason_counts
from relayd.console.paging import PagePosition, PageTokenInvalid, advance, read_token
from relayd.console.rates import KindCounters, delivery_rate
from relayd.console.signatures import error_signature
from relayd.state.deadletters import DeadLetter, decode_dead_letter, encode_dead_letter


def letter(
    id_: str = "p:outbox:1",
    *,
    kind: str = "outbox",
    reason_code: str = "permanent",
    reason: str = "webhook answered 500",
    target: str | None = "order-1",
    event_kind: str = "Ping",
) -> DeadLetter:
    envelope = {"kind": kind, "id": id_, "target_id": target, "event": {"id": "e", "kind": event_kind}}
    if kind == "timer":
        raw = encode_dead_letter(
            id_=id_, kind="timer", reason_code=reason_code, reason=reason, attempts=1,
            first_attempt_at=1.0, last_attempt_at=2.0, dead_at=3.0, envelope=envelope,
            member=b"exe\x00path", fire_at=1.0,
        )  # fmt: skip
    else:
        raw = encode_dead_letter(
            id_=id_, kind=kind, reason_code=reason_code, reason=reason, attempts=1,  # type: ignore[arg-type]
            first_attempt_at=1.0, last_attempt_at=2.0, dead_at=3.0, envelope=envelope,
            field="1", seq=1, value=b"{}",
        )  # fmt: skip
    return decode_dead_letter(raw)


@pytest.mark.parametrize(
    ("text", "signature"),
    [
        ("webhook answered 503 for order-17 after 2.5s", "webhook answered <n> for order-<n> after <n>s"),
        ("webhook answered 503 for order-9 after 0.1s", "webhook answered <n> for order-<n> after <n>s"),
        ("no route to 10.0.0.7:6379", "no route to <ip>"),
        ("execution 0b1c2d3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e not found", "execution <uuid> not found"),
        ("POST https://hooks.example/a?b=1 refused", "POST <url> refused"),
        ("key 'user:42' missing", "key <str> missing"),
        ("request 8f3a9c2e11d4aa failed", "request <hex> failed"),
        ("", "(no error text)"),
        ("http 401", "http 401"),
        ('http 422: {"error":"order 17 refused"}', "http 422: {<str>:<str>}"),
        ("http 404: no route for order-9", "http 404: no route for order-<n>"),
    ],
    ids=[
        "status-and-id",
        "same-signature",
        "ip",
        "uuid",
        "url",
        "quoted",
        "hex",
        "empty",
        "http-status-kept",
        "http-status-and-body",
        "http-404-apart",
    ],
)
def test_error_signature_replaces_numbers_and_ids(text: str, signature: str) -> None:
    assert error_signature(text) == signature


def test_a_filter_reads_back_from_its_own_query_string() -> None:
    wanted = DeadLetterFilter(
        kind="outbox", reason_code="permanent", target="order-1", id="p:outbox:1", exact_id=True
    )

    again = DeadLetterFilter.from_query(dict(parse_qsl(wanted.to_query())))

    assert again.kind == "outbox"
    assert again.reason_code == "permanent"
    assert again.exact_id
    assert again.target == "order-1"
    assert again.id == "p:outbox:1"


def test_a_filter_reads_back_from_its_record() -> None:
    # The replay confirm form posts the record's fields: an exact id must stay exact, or the
    # replay would take every id containing it while the dry run counted one.
    wanted = DeadLetterFilter(kind="outbox", id="p:outbox:1", exact_id=True)

    assert DeadLetterFilter.from_query(wanted.as_record()) == wanted


def test_a_filter_refuses_an_unknown_kind_and_overlong_values() -> None:
    with pytest.raises(FilterInvalid):
        DeadLetterFilter.from_query({"kind": "mail"})
    with pytest.raises(FilterInvalid):
        DeadLetterFilter.from_query({"target": "x" * 500})


@pytest.mark.parametrize(
    ("wanted", "expected"),
    [
        (DeadLetterFilter(), True),
        (DeadLetterFilter(kind="spawn"), False),
        (DeadLetterFilter(reason_code="bad_json"), False),
        (DeadLetterFilter(target="order-1"), True),
        (DeadLetterFilter(target="order-2"), False),
        (DeadLetterFilter(event_kind="Ping"), True),
        (DeadLetterFilter(event_kind="Pong"), False),
        (DeadLetterFilter(id="OUTBOX"), True),
        (DeadLetterFilter(id="p:outbox:", exact_id=True), False),
        (DeadLetterFilter(signature="webhook answered <n>"), True),
        (DeadLetterFilter(text="PING"), True),
        (DeadLetterFilter(text="refund"), False),
    ],
    ids=[
        "empty",
        "kind",
        "reason",
        "target",
        "other-target",
        "event",
        "other-event",
        "id-part",
        "exact",
        "sig",
        "payload-text",
        "other-text",
    ],
)
def test_a_filter_matches_on_every_field_it_sets(wanted: DeadLetterFilter, expected: bool) -> None:
    assert wanted.matches(letter()) is expected


def test_page_tokens_walk_every_kind_then_end() -> None:
    kinds = ("spawn", "outbox", "timer")

    assert read_token(None, kinds) == PagePosition(0, 0)
    assert read_token("outbox:123", kinds) == PagePosition(1, 123)
    assert advance(PagePosition(1, 0), 77, kinds) == PagePosition(1, 77)
    assert advance(PagePosition(1, 77), 0, kinds) == PagePosition(2, 0)
    assert advance(PagePosition(2, 5), 0, kinds) is None
    assert PagePosition(1, 77).token(kinds) == "outbox:77"


@pytest.mark.parametrize("token", ["mail:1", "outbox", "outbox:-1", "outbox:x", "timer:" + "9" * 30])
def test_a_forged_page_token_is_refused(token: str) -> None:
    with pytest.raises(PageTokenInvalid):
        read_token(token, ("outbox", "timer"))


def test_groups_count_letters_that_failed_alike_largest_first() -> None:
    letters = [
        letter("a", reason="answered 500 for order-1"),
        letter("b", reason="answered 500 for order-2"),
        letter("c", reason="answered 500 for order-3"),
        letter("d", reason_code="bad_json", reason="bad_json: line 1"),
    ]

    groups = group_dead_letters(letters)

    assert [(g.reason_code, g.signature, g.count) for g in groups] == [
        ("permanent", "answered <n> for order-<n>", 3),
        ("bad_json", "bad_json: line <n>", 1),
    ]
    assert groups[0].as_filter().matches(letters[1])
    assert reason_counts(letters) == {"permanent": 3, "bad_json": 1}


def test_delivery_rate_is_what_was_written_less_what_stayed() -> None:
    before = KindCounters(seq=100, backlog=10, dead=1)
    after = KindCounters(seq=160, backlog=20, dead=3)

    assert delivery_rate(before, after, 2.0) == pytest.approx((60 - 10 - 2) / 2)
    assert delivery_rate(KindCounters(None, 0, 0), KindCounters(None, 5, 0), 1.0) is None


def test_equivalent_commands_name_the_prefix_never_the_url() -> None:
    ids = [f"p:outbox:{n}" for n in range(MAX_IDS_SHOWN + 3)]

    assert (
        replay_command("p", DeadLetterFilter(), ["p:outbox:1"]) == "relayd dlq replay --prefix p p:outbox:1"
    )
    assert replay_command("p", DeadLetterFilter(kind="timer")) == "relayd dlq replay --prefix p --kind timer"
    assert replay_command("p", DeadLetterFilter()) == "relayd dlq replay --prefix p --all"
    assert replay_command("p", DeadLetterFilter(), ids).endswith("and 3 more ids (see the audit record)")
    assert (
        purge_command("p", DeadLetterFilter(kind="spawn")) == "relayd dlq purge --prefix p --kind spawn --yes"
    )


@pytest.mark.parametrize(
    ("document", "shown"),
    [
        (
            {"value": '{"t": "o-1", "e": "{\\"kind\\": \\"Ping\\"}"}'},
            '{\n  "t": "o-1",\n  "e": {\n    "kind": "Ping"\n  }\n}',
        ),
        ({"value": '{"t": "o-1", "e": not json'}, '{"t": "o-1", "e": not json'),
        ({"member": "exe\x00path"}, "exe\\x00path"),
        ({"value_b64": "/w=="}, "/w=="),
        ({}, "-"),
    ],
    ids=["event-parsed", "not-json", "member", "b64", "nothing"],
)
def test_the_stored_value_is_shown_as_it_lived_in_redis(document: dict[str, object], shown: str) -> None:
    from relayd.console.display import stored_value

    assert stored_value(document) == shown
