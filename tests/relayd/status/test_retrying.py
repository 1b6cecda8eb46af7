"""The retrying view's bounded, paged read of the attempt records, on fakeredis and a real redis-server."""

from __future__ import annotations

import pytest

from relayd.state.attempts import MAX_ERROR, AttemptRecord, decode_record, encode_record
from relayd.state.keys import RelayKeys
from relayd.status.retrying import PageTokenInvalid, read_retrying
from store import Keyspace

pytestmark = pytest.mark.usefixtures("backend")


async def test_pages_walk_every_record_of_every_kind_once(async_client, prefix) -> None:
    """130 outbox and 20 timer records, 25 a page: each listed once, the last page says so.

    The errors are long, as real ones are: a hash of short values is stored compact, and
    ``HSCAN`` returns such a hash whole in one step (at most ``hash-max-listpack-entries``).
    """
    keys = RelayKeys(Keyspace(prefix))
    record = AttemptRecord(2, 10.0, 20.0, "HTTP 503 Service Unavailable: " + "x" * 80, 50.0, "exe-1")
    await async_client.hset(
        keys.attempts("outbox"), mapping={str(s): encode_record(record) for s in range(130)}
    )
    await async_client.hset(
        keys.attempts("timer"), mapping={f"timeout:exe-{i}:a:1.0": encode_record(record) for i in range(20)}
    )
    seen: list[str] = []
    token: str | None = None
    pages = 0

    while True:
        page = await read_retrying(async_client, Keyspace(prefix), token, limit=25)
        seen += [e.id for e in page.entries]
        pages += 1
        token = page.next_token
        if token is None:
            break

    assert len(seen) == len(set(seen)) == 150
    assert f"{prefix}:outbox:7" in seen
    assert "timeout:exe-3:a:1.0" in seen
    assert pages >= 150 // 25 - 1


async def test_an_entry_shows_what_its_record_holds_and_an_old_record_shows_its_attempts(
    async_client, prefix
) -> None:
    keys = RelayKeys(Keyspace(prefix))
    await async_client.hset(
        keys.attempts("spawn"),
        mapping={
            "1": encode_record(AttemptRecord(3, 1.0, 2.0, "boom", 9.0, "child")),
            "2": b'{"n":1,"f":1,"l":1}',
        },
    )

    page = await read_retrying(async_client, Keyspace(prefix))

    by_id = {e.id: e for e in page.entries}
    new, old = by_id[f"{prefix}:spawn:1"], by_id[f"{prefix}:spawn:2"]
    assert (new.attempts, new.last_error, new.next_attempt_at, new.key) == (3, "boom", 9.0, "child")
    assert (old.attempts, old.last_error, old.next_attempt_at, old.key) == (1, "", None, None)


async def test_a_token_not_handed_out_is_refused(async_client, prefix) -> None:
    with pytest.raises(PageTokenInvalid):
        await read_retrying(async_client, Keyspace(prefix), "nokind:3")


def test_a_long_error_is_cut_in_the_record_head_and_tail_kept() -> None:
    error = "start " + "x" * 5000 + " end"

    decoded = decode_record(encode_record(AttemptRecord(1, 1.0, 1.0, error, 2.0, None)))

    assert decoded is not None
    assert len(decoded.last_error) <= MAX_ERROR
    assert decoded.last_error.startswith("start ")
    assert decoded.last_error.endswith(" end")
