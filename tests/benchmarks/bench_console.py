"""Benchmark: the console's dead-letter page at 1,000 and at 1,000,000 dead letters.

Starts its own redis-server on a free loopback port, seeds two prefixes with pipelined HSETs of
dead letters in relayd's own format (1k in one, 1M in the other), starts ``relayd console`` on
both, and times ``GET /dead-letters`` end to end over HTTP, alternating the two prefixes so both
see the same machine load; prints the medians and their ratio (which must stay under 2: a page
costs one HSCAN step, however many dead letters are parked).
Run: ``flock /tmp/relayd-bench.lock python tests/benchmarks/bench_console.py``.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for support.console

from support.console import start_console

from relayd.bench.server import throwaway_redis_server
from relayd.state.deadletters import encode_dead_letter
from relayd.state.keys import RelayKeys
from store.keys import Keyspace

SMALL, LARGE = 1_000, 1_000_000
#: Field-value pairs per HSET command, and commands per pipeline round-trip while seeding.
PAIRS_PER_HSET, HSETS_PER_ROUND = 1000, 20
_MARK = "SEQ_MARK"


def _template(prefix: str) -> bytes:
    """One dead letter with a marker where the seq goes (replaced per entry, no JSON per entry)."""
    envelope = {"v": "relayd/1", "kind": "outbox", "id": f"{prefix}:outbox:{_MARK}", "prefix": prefix,
                "attempt": 10, "relayed_at": 1.7e9, "seq": 0, "target_id": "order-7",
                "event": {"id": "evt-" + _MARK, "kind": "Charge", "data": {"amount": 12}}}  # fmt: skip
    return encode_dead_letter(
        id_=f"{prefix}:outbox:{_MARK}", kind="outbox", reason_code="max_attempts",
        reason="gave up after 10 attempts: webhook answered 503", attempts=10, first_attempt_at=1.7e9,
        last_attempt_at=1.7e9 + 60, dead_at=1.7e9 + 61, envelope=envelope, field=_MARK, seq=0,
        value=b'{"t": "order-7", "e": "{}"}',
    )  # fmt: skip


def seed_dead_letters(client: redis.Redis, prefix: str, count: int) -> None:
    """Park ``count`` outbox dead letters under ``prefix`` with pipelined multi-pair HSETs."""
    key = RelayKeys(Keyspace(prefix)).dead("outbox")
    template, mark = _template(prefix), _MARK.encode()
    pipe = client.pipeline(transaction=False)
    for start in range(0, count, PAIRS_PER_HSET):
        mapping = {}
        for seq in range(start, min(count, start + PAIRS_PER_HSET)):
            text = str(seq).encode()
            mapping[b"%s:outbox:%s" % (prefix.encode(), text)] = template.replace(mark, text)
        pipe.hset(key, mapping=mapping)
        if len(pipe) >= HSETS_PER_ROUND:
            pipe.execute()
    pipe.execute()


def page_times_ms(url: str, prefixes: tuple[str, str], rounds: int) -> dict[str, float]:
    """Median milliseconds of ``GET /dead-letters`` per prefix, the prefixes alternating."""
    times: dict[str, list[float]] = {p: [] for p in prefixes}
    with httpx.Client(base_url=url, timeout=60) as client:
        for prefix in prefixes:
            client.get(f"/dead-letters?prefix={prefix}").raise_for_status()  # warm-up
        for _ in range(rounds):
            for prefix in prefixes:
                began = time.perf_counter()
                answer = client.get(f"/dead-letters?prefix={prefix}")
                times[prefix].append((time.perf_counter() - began) * 1000)
                answer.raise_for_status()
                assert answer.text.count('class="dead-letter"') >= 40, "a page holds about 50 dead letters"
    return {prefix: statistics.median(values) for prefix, values in times.items()}


def hscan_calls_per_page(url: str, client: redis.Redis, prefix: str) -> int:
    """HSCAN commands the server ran for one ``GET /dead-letters`` of ``prefix`` (nothing else
    the console does scans a hash)."""

    def hscans() -> int:
        return int(client.info("commandstats").get("cmdstat_hscan", {}).get("calls", 0))

    before = hscans()
    httpx.get(f"{url}/dead-letters?prefix={prefix}", timeout=60).raise_for_status()
    return hscans() - before


@dataclass(frozen=True)
class PageCost:
    """The dead-letter page at 1k and at 1M: median milliseconds and HSCAN commands per page."""

    small_ms: float
    large_ms: float
    small_hscans: int
    large_hscans: int


def measure(redis_url: str, client: redis.Redis, *, rounds: int = 15) -> PageCost:
    """Seed both prefixes, serve them, and return what a page costs at 1k and at 1M."""
    began = time.perf_counter()
    seed_dead_letters(client, "small", SMALL)
    seed_dead_letters(client, "large", LARGE)
    print(f"seeded {SMALL:,} + {LARGE:,} dead letters in {time.perf_counter() - began:.1f} s")
    console = start_console(redis_url, ["small", "large"])
    try:
        medians = page_times_ms(console.url, ("small", "large"), rounds)
        hscans = {prefix: hscan_calls_per_page(console.url, client, prefix) for prefix in medians}
    finally:
        console.stop()
    return PageCost(medians["small"], medians["large"], hscans["small"], hscans["large"])


def main() -> None:
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server not on PATH")
    with throwaway_redis_server() as (_, port):
        client = redis.Redis(port=port)
        cost = measure(f"redis://127.0.0.1:{port}/0", client)
        print(f"dead-letter page at {SMALL:>9,}: {cost.small_ms:7.2f} ms (median), {cost.small_hscans} HSCAN")
        print(f"dead-letter page at {LARGE:>9,}: {cost.large_ms:7.2f} ms (median), {cost.large_hscans} HSCAN")
        print(f"ratio 1M/1k = {cost.large_ms / cost.small_ms:.2f} (must be < 2)")


if __name__ == "__main__":
    main()
