"""relayd against a real TLS redis-server: verified with the right CA, refused otherwise.

The PKI (a CA, a server certificate for 127.0.0.1, and an unrelated CA) and the TLS-only
redis-server come from ``support.tls``. relayd always verifies: the right ``--redis-ca-file``
works; a wrong CA, or none (the system store does not know the test CA), fails at once with
one line and exit 3; plaintext ``redis://`` to the TLS port fails cleanly with exit 3.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from support.ledger import assert_ledger, ledger_from_jsonl, report_ledger
from support.tls import TlsRedisServer, tls_redis_server
from support.workload import Workload, stored_ids

from store import RedisStore

__all__ = ["tls_redis_server"]

#: Bound for one relayd run, in seconds (a refused connect must not take anywhere near this).
RUN_TIMEOUT_S = 60


def relayd(*args: str, timeout_s: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["relayd", *args], capture_output=True, text=True, timeout=timeout_s, check=False)


@pytest.fixture
def tls_prefix() -> str:
    return "tls" + uuid.uuid4().hex[:10]


def test_sweep_once_over_verified_tls_drains_a_mixed_backlog(
    tls_redis_server: TlsRedisServer,
    tls_prefix: str,
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    """Outbox, spawns and due timers written over TLS are all delivered, and acked on the server."""
    client = tls_redis_server.client()
    workload = Workload(
        RedisStore(client, prefix=tls_prefix), rate_per_s=1e9, abort_every=9, timer_delay_s=(-5.0, 0.0)
    )
    committed = workload.run(200).committed
    out = tmp_path / "out.jsonl"

    result = relayd(
        "sweep", "--once", "--log-level", "warning",
        "--redis-url", tls_redis_server.url,
        "--redis-ca-file", str(tls_redis_server.ca_path),
        "--prefix", tls_prefix,
        "--sink", f"jsonl:{out}",
    )  # fmt: skip

    ledger = ledger_from_jsonl("tls-sweep-once", committed, out)
    report_ledger(ledger, record_property)
    assert result.returncode == 0, result.stderr
    assert_ledger(ledger, max_duplicates=0)
    assert stored_ids(client, tls_prefix) == set()
    client.close()


def test_status_over_verified_tls_reports_the_backlog(
    tls_redis_server: TlsRedisServer, tls_prefix: str
) -> None:
    client = tls_redis_server.client()
    ledger = Workload(RedisStore(client, prefix=tls_prefix), rate_per_s=1e9, timer_delay_s=(-5.0, 0.0)).run(
        30
    )
    client.close()

    result = relayd(
        "status", "--json",
        "--redis-url", tls_redis_server.url,
        "--redis-ca-file", str(tls_redis_server.ca_path),
        "--prefix", tls_prefix,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    (report,) = json.loads(result.stdout)["prefixes"]
    assert {kind: len(ledger.of_kind(kind)) for kind in ("outbox", "spawn", "timer")} == report["backlog"]


@pytest.mark.parametrize(
    "command", [["sweep", "--once"], ["status"], ["sweep", "--metrics-addr", "127.0.0.1:0"]]
)
@pytest.mark.parametrize("trust", ["wrong-ca", "system-store"])
def test_an_untrusted_server_certificate_fails_at_once_with_one_line(
    tls_redis_server: TlsRedisServer, tls_prefix: str, command: list[str], trust: str, tmp_path: Path
) -> None:
    """No retry, no traceback, no log noise: one line naming the cause and the option, exit 3.

    The long-running ``sweep`` (which retries an unreachable Redis forever) stops too: a
    certificate the CA does not vouch for will not start verifying on a later try.
    """
    ca = ["--redis-ca-file", str(tls_redis_server.wrong_ca_path)] if trust == "wrong-ca" else []
    sink = ["--sink", f"jsonl:{tmp_path / 'out.jsonl'}"] if command[0] == "sweep" else []

    result = relayd(
        *command,
        "--redis-url", tls_redis_server.url,
        *ca,
        "--prefix", tls_prefix,
        *sink,
        # the long-running sweep logs where it serves /metrics at info; the error is what counts
        "--log-level", "warning",
        timeout_s=15,
    )  # fmt: skip

    lines = result.stderr.strip().splitlines()
    assert result.returncode == 3
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("relayd: error: Redis at rediss://127.0.0.1:")
    assert "certificate verification failed" in lines[0]
    assert "--redis-ca-file" in lines[0]
    assert not (tmp_path / "out.jsonl").exists() or (tmp_path / "out.jsonl").read_text() == ""


@pytest.mark.parametrize("command", [["sweep", "--once"], ["status"]])
def test_plaintext_to_the_tls_port_fails_cleanly(
    tls_redis_server: TlsRedisServer, tls_prefix: str, command: list[str], tmp_path: Path
) -> None:
    """The TLS port resets a plaintext client: relayd gives up after its brief retries, exit 3."""
    sink = ["--sink", f"jsonl:{tmp_path / 'out.jsonl'}"] if command[0] == "sweep" else []

    result = relayd(
        *command,
        "--redis-url", f"redis://127.0.0.1:{tls_redis_server.tls_port}",
        "--prefix", tls_prefix,
        *sink,
        "--log-level", "error",
        timeout_s=30,
    )  # fmt: skip

    lines = result.stderr.strip().splitlines()
    assert result.returncode == 3
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(
        f"relayd: error: Redis at redis://127.0.0.1:{tls_redis_server.tls_port} unreachable"
    )


def test_tls_files_with_a_plaintext_url_are_a_configuration_error(
    tls_redis_server: TlsRedisServer, tls_prefix: str
) -> None:
    """Asking for a CA while writing ``redis://`` is a mistake caught before connecting (exit 2)."""
    result = relayd(
        "status",
        "--redis-url", f"redis://127.0.0.1:{tls_redis_server.tls_port}",
        "--redis-ca-file", str(tls_redis_server.ca_path),
        "--prefix", tls_prefix,
    )  # fmt: skip

    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2
    assert len(lines) == 1
    assert "rediss://" in lines[0]
