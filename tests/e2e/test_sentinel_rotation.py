"""The master's password rotated under a ``relayd sweep`` that finds the master through sentinels.

A master, a replica and three sentinels, each requiring a password (``support.sentinel``). The
master's and the replica's ``requirepass`` change, the sentinels learn the new ``auth-pass``,
the password file (a kubelet-style Secret volume) is swapped and the relay's connections are
cut: the same process reconnects through the sentinels with the new password and delivers the
next batch, each entry once.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from support.ledger import read_jsonl
from support.secret_files import SecretDir
from support.seeding import commit_outbox
from support.sentinel import SERVICE, SentinelDeployment
from support.sweeper_process import SweepProcess
from support.waiting import wait_until

pytestmark = [pytest.mark.slow]

OLD_PASSWORD = "old-master-pw-3Rv"
NEW_PASSWORD = "new-master-pw-6Lm"
SENTINEL_PASSWORD = "sentinel-pw-2Wq"
TIMEOUT_S = 60.0


def test_the_masters_password_rotated_is_followed_through_the_sentinels(tmp_path: Path) -> None:
    prefix = "senrot" + uuid.uuid4().hex[:8]
    out = tmp_path / "out.jsonl"
    secrets = SecretDir(tmp_path / "secret", "kubelet")
    secrets.write({"redis-password": OLD_PASSWORD + "\n", "sentinel-password": SENTINEL_PASSWORD + "\n"})
    with SentinelDeployment(master_password=OLD_PASSWORD, sentinel_password=SENTINEL_PASSWORD) as deployment:
        args = [
            "--redis-url", deployment.url(), "--prefix", prefix, "--sink", f"jsonl:{out}",
            "--redis-password-file", str(secrets.path("redis-password")),
            "--sentinel-password-file", str(secrets.path("sentinel-password")),
        ]  # fmt: skip
        relay = SweepProcess(args, tmp_path / "relay.log")
        try:
            first = commit(deployment, prefix, range(1, 51), OLD_PASSWORD)
            wait_until(lambda: delivered(relay, out) >= first, TIMEOUT_S, "the first batch")

            assert deployment.master is not None
            assert deployment.replica is not None
            for server in (deployment.replica, deployment.master):
                client = server.client(password=OLD_PASSWORD)
                client.config_set("masterauth", NEW_PASSWORD)
                client.config_set("requirepass", NEW_PASSWORD)
                client.close()
            for sentinel in deployment.sentinels:
                client = sentinel.client()
                client.execute_command("SENTINEL", "SET", SERVICE, "auth-pass", NEW_PASSWORD)
                client.close()
            secrets.write({"redis-password": NEW_PASSWORD + "\n"})
            master = deployment.master.client(password=NEW_PASSWORD)
            killed = master.execute_command("CLIENT", "KILL", "TYPE", "normal")
            master.close()
            second = commit(deployment, prefix, range(51, 251), NEW_PASSWORD)
            wait_until(lambda: delivered(relay, out) >= second, TIMEOUT_S, "the second batch")
        finally:
            code = relay.stop()

    assert killed >= 1
    ids = [d.id for d in read_jsonl(out).deliveries]
    assert sorted(ids) == sorted(first | second)
    assert [e["option"] for e in relay.events("secret_reloaded")] == ["--redis-password-file"]
    log = relay.log_text()
    assert NEW_PASSWORD not in log
    assert code == 0, log[-2000:]


def commit(deployment: SentinelDeployment, prefix: str, seqs: range, password: str) -> set[str]:
    """Commit outbox entries at ``seqs`` on the master; their delivery ids."""
    assert deployment.master is not None
    client = deployment.master.client(password=password)
    try:
        return commit_outbox(client, prefix, seqs, targets=3)
    finally:
        client.close()


def delivered(relay: SweepProcess, out: Path) -> set[str]:
    assert relay.running, relay.log_text()[-3000:]
    return {d.id for d in read_jsonl(out).deliveries}
