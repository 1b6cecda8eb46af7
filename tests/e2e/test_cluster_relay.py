"""``relayd sweep --once`` and ``status`` on a real Redis Cluster addressed as ``redis+cluster://``.

The cluster (3 masters, 1 replica each) is started by the test module itself with
``support.cluster``; the backlog is written through ``store.RedisStore`` on redis-py's cluster
client, with aborted transactions leaving burned seqs, so the relay meets the same gaps an
engine leaves.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.binaries import require_binaries
from support.cluster import RedisCluster
from support.ledger import assert_ledger, ledger_from_jsonl, report_ledger
from support.workload import Workload, stored_ids

from store import RedisStore

pytestmark = pytest.mark.cluster

#: Generous bound for one relayd process run, in seconds (a pass over this backlog takes ~1 s).
RUN_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisCluster]:
    require_binaries("redis-server", "redis-cli")
    with RedisCluster(masters=3, replicas=1) as started:
        yield started


@pytest.fixture
def tagged_prefix() -> str:
    """``{shard-7}`` plus a unique tail: every key of the prefix lands in shard-7's slot."""
    return f"{{shard-7}}x{uuid.uuid4().hex[:8]}"


def relayd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["relayd", *args, "--log-level", "warning"],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def test_sweep_once_drains_a_mixed_backlog_on_a_cluster(
    cluster: RedisCluster, tagged_prefix: str, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    """Outbox, spawns and due timers written through ``store`` all reach the sink; nothing is left."""
    client = cluster.client()
    # timers already due, so one --once pass owes all of them
    workload = Workload(
        RedisStore(client, prefix=tagged_prefix), rate_per_s=1e9, abort_every=7, timer_delay_s=(-5.0, 0.0)
    )
    ledger_in = workload.run(400)
    out = tmp_path / "out.jsonl"

    result = relayd(
        "sweep",
        "--once",
        "--redis-url",
        cluster.seed_url,
        "--prefix",
        tagged_prefix,
        "--sink",
        f"jsonl:{out}",
    )

    ledger = ledger_from_jsonl("cluster-sweep-once", ledger_in.committed, out)
    report_ledger(ledger, record_property)
    assert result.returncode == 0, result.stderr
    assert_ledger(ledger, max_duplicates=0)
    assert ledger_in.burned, "the workload should have burned seqs the relay had to pass over"
    assert set(ledger.by_kind) == {"outbox", "spawn", "timer"}
    assert stored_ids(client, tagged_prefix) == set()
    client.close()


def test_status_reads_the_backlog_on_a_cluster(cluster: RedisCluster, tagged_prefix: str) -> None:
    """``status --json`` counts what is pending under a tagged prefix on the cluster."""
    client = cluster.client()
    workload = Workload(RedisStore(client, prefix=tagged_prefix), rate_per_s=1e9, timer_delay_s=(-5.0, 0.0))
    ledger = workload.run(50)

    result = relayd("status", "--json", "--redis-url", cluster.seed_url, "--prefix", tagged_prefix)

    assert result.returncode == 0, result.stderr
    (report,) = json.loads(result.stdout)["prefixes"]
    expected = {kind: len(ledger.of_kind(kind)) for kind in ("outbox", "spawn", "timer")}
    assert expected == report["backlog"]
    assert expected["timer"] == report["due_timers"]
    client.close()


@pytest.mark.parametrize("prefix", ["stm", "shard-7", "{}x"], ids=["plain", "no-braces", "empty-tag"])
def test_a_prefix_without_hash_tag_is_refused_in_cluster_mode(prefix: str, tmp_path: Path) -> None:
    """One clear line on stderr, exit 2, no traceback, before anything connects."""
    result = relayd(
        "sweep",
        "--once",
        "--redis-url",
        "redis+cluster://127.0.0.1:1",  # nothing listens: a config error must come first
        "--prefix",
        "{shard-1}ok",
        "--prefix",
        prefix,
        "--sink",
        f"jsonl:{tmp_path / 'out.jsonl'}",
    )

    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2
    assert len(lines) == 1, result.stderr
    assert "hash tag" in lines[0]
    assert repr(prefix) in lines[0]
    assert "Traceback" not in result.stderr


def test_tagged_prefixes_and_ranges_are_accepted_in_cluster_mode(
    cluster: RedisCluster, tmp_path: Path
) -> None:
    """The compact range form expands inside the tag, so every expanded prefix is tagged."""
    result = relayd(
        "sweep",
        "--once",
        "--redis-url",
        cluster.seed_url,
        "--prefix",
        f"{{e2e-{uuid.uuid4().hex[:6]}-0..3}}",
        "--sink",
        f"jsonl:{tmp_path / 'out.jsonl'}",
    )

    assert result.returncode == 0, result.stderr
