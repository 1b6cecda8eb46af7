"""``--sink-rate 500``: a real relay delivers 500 entries a second into a real Redis stream.

The stream entry ids carry Redis's own millisecond clock, so the rate is read from what arrived,
not from the relay's side. 3000 entries take about six seconds: long enough that the bucket's
first burst (a tenth of a second's worth) does not count, short enough for a test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from faults.harness import RelayProcess
from support.binaries import require_binaries
from support.redis_server import RedisServer
from support.seeding import Entries
from support.waiting import wait_until

from store import Keyspace

pytestmark = pytest.mark.slow

PREFIX = "rate"
ENTRIES = 3000
RATE = 500
#: What the bucket holds at first and sends at once: a tenth of a second's worth.
BURST = RATE // 10


def test_sink_rate_500_delivers_500_entries_a_second(tmp_path: Path) -> None:
    require_binaries("redis-server", "relayd")
    server = RedisServer(tmp_path / "redis")
    server.start()
    client = server.client()
    try:
        pipe = client.pipeline()
        entries = Entries(pipe, PREFIX)
        for seq in range(1, ENTRIES + 1):
            entries.outbox(seq, f"t{seq % 20}", f"e{seq}")
        pipe.set(Keyspace(PREFIX).outbox_seq, ENTRIES)
        pipe.execute()
        relay = RelayProcess(
            [
                "--redis-url", server.url, "--prefix", PREFIX,
                "--sink", f"redis-stream:{server.url}?stream=out", "--sink-rate", str(RATE),
                "--poll-interval", "0.2", "--log-level", "warning",
            ],
            tmp_path / "relay.log",
        )  # fmt: skip
        relay.start()
        try:
            wait_until(lambda: client.xlen("out") >= ENTRIES, 60, "every entry in the stream")
        finally:
            relay.stop()
        stamps_ms = [int(entry_id.split(b"-")[0]) for entry_id, _ in client.xrange("out")]
    finally:
        server.kill()

    span_s = (stamps_ms[-1] - stamps_ms[0]) / 1000
    rate = (len(stamps_ms) - BURST) / span_s
    print(f"--sink-rate {RATE}: {len(stamps_ms)} entries in {span_s:.2f}s, {rate:.1f} entries/s")
    assert len(stamps_ms) == ENTRIES
    assert RATE * 0.9 <= rate <= RATE * 1.1
