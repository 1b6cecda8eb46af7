"""Redis credentials and certificates rotated under a running ``relayd sweep``, with no restart.

Each test runs a real redis-server and a real ``relayd sweep`` subprocess delivering into a
jsonl file; a first batch is delivered, the material is rotated the way an operator does it
(the server first, then the mounted file, either rewritten atomically or swapped by a
kubelet-style ``..data`` symlink flip, then the old connections cut), and a second batch must
be delivered by the same process, each entry once. Before relayd watched its files, the same
process failed every reconnect with the old material until it was restarted.
"""

from __future__ import annotations

import datetime as dt
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from support.ledger import read_jsonl
from support.ports import pick_ports
from support.processes import end_process
from support.redis_server import RedisServer, start_redis_server
from support.secret_files import MODES, Mode, SecretDir
from support.seeding import commit_outbox
from support.sweeper_process import SweepProcess
from support.tls import Pki, make_pki
from support.waiting import seconds_until, wait_until

pytestmark = [pytest.mark.slow]

PREFIX = "rot"
USER = "relay"
OLD_PASSWORD = "old-pw-4Fq9"
NEW_PASSWORD = "new-pw-8Kd1"
#: Generous: a busy machine with other test workers; the figure itself is reported, not asserted.
DELIVERY_TIMEOUT_S = 60.0


@pytest.fixture
def server() -> Iterator[RedisServer]:
    running = start_redis_server()
    yield running
    running.cleanup()


def delivered(out: Path) -> list[str]:
    return [d.id for d in read_jsonl(out).deliveries]


def wait_delivered(relay: SweepProcess, out: Path, wanted: set[str], what: str) -> float:
    def done() -> bool:
        assert relay.running, f"relayd exited while waiting for {what}: {relay.log_text()[-3000:]}"
        return wanted <= set(delivered(out))

    return seconds_until(done, DELIVERY_TIMEOUT_S, what)


def create_user(admin: redis.Redis, password: str) -> None:
    admin.execute_command("ACL", "SETUSER", USER, "on", f">{password}", "~*", "&*", "+@all")


@pytest.mark.parametrize("mode", MODES)
def test_an_acl_password_rotation_is_followed_by_the_same_process(
    server: RedisServer, tmp_path: Path, mode: Mode, record_property
) -> None:
    admin = server.client()
    create_user(admin, OLD_PASSWORD)
    secrets = SecretDir(tmp_path / "secret", mode)
    secrets.write({"username": USER + "\n", "password": OLD_PASSWORD + "\n"})
    out = tmp_path / "out.jsonl"
    args = [
        "--redis-url", server.url, "--prefix", PREFIX, "--sink", f"jsonl:{out}",
        "--redis-username-file", str(secrets.path("username")),
        "--redis-password-file", str(secrets.path("password")),
    ]  # fmt: skip
    relay = SweepProcess(args, tmp_path / "relay.log")
    try:
        first = commit_outbox(admin, PREFIX, range(1, 101), targets=7)
        wait_delivered(relay, out, first, "the first batch")

        admin.execute_command("ACL", "SETUSER", USER, "resetpass", f">{NEW_PASSWORD}")
        secrets.write({"password": NEW_PASSWORD + "\n"})
        killed = admin.execute_command("CLIENT", "KILL", "USER", USER)
        second = commit_outbox(admin, PREFIX, range(101, 301), targets=7)
        took_s = wait_delivered(relay, out, second, "the second batch, after the rotation")
        reloads = relay.metric(
            "relayd_secret_reloads_total", option="--redis-password-file", outcome="reloaded"
        )
    finally:
        code = relay.stop()

    record_property("second_batch_after_rotation_s", round(took_s, 2))
    assert killed >= 1  # the relay's connections were cut: it had to authenticate again
    ids = delivered(out)
    assert sorted(ids) == sorted(first | second)  # everything, each once
    assert reloads == 1.0
    (reloaded,) = relay.events("secret_reloaded")
    assert reloaded["option"] == "--redis-password-file"
    log = (tmp_path / "relay.log").read_text()
    assert NEW_PASSWORD not in log
    assert OLD_PASSWORD not in log
    assert code == 0, log[-2000:]


@pytest.mark.parametrize("mode", MODES)
def test_an_unreadable_or_empty_password_file_keeps_the_old_password_and_is_named_in_readyz(
    server: RedisServer, tmp_path: Path, mode: Mode
) -> None:
    admin = server.client()
    create_user(admin, OLD_PASSWORD)
    secrets = SecretDir(tmp_path / "secret", mode)
    secrets.write({"password": OLD_PASSWORD + "\n"})
    password_file = secrets.path("password")
    out = tmp_path / "out.jsonl"
    args = [
        "--redis-url", f"redis://{USER}@127.0.0.1:{server.port}/0", "--prefix", PREFIX,
        "--sink", f"jsonl:{out}", "--redis-password-file", str(password_file),
    ]  # fmt: skip
    relay = SweepProcess(args, tmp_path / "relay.log")
    try:
        first = commit_outbox(admin, PREFIX, range(1, 51), targets=7)
        wait_delivered(relay, out, first, "the first batch")
        wait_until(lambda: relay.readyz()[0] == 200, DELIVERY_TIMEOUT_S, "ready")

        secrets.break_file("password")  # mid-rotation: the file is gone for a while
        unreadable = wait_until(lambda: _refused(relay, password_file), DELIVERY_TIMEOUT_S, "/readyz")
        admin.execute_command("CLIENT", "KILL", "USER", USER)  # new connections need the password now
        second = commit_outbox(admin, PREFIX, range(51, 101), targets=7)
        wait_delivered(relay, out, second, "the second batch, with the file unreadable")

        secrets.write({"password": ""})  # then empty
        empty = wait_until(lambda: _refused(relay, password_file, "is empty"), DELIVERY_TIMEOUT_S, "empty")
        admin.execute_command("CLIENT", "KILL", "USER", USER)
        third = commit_outbox(admin, PREFIX, range(101, 151), targets=7)
        wait_delivered(relay, out, third, "the third batch, with the file empty")

        admin.execute_command("ACL", "SETUSER", USER, "resetpass", f">{NEW_PASSWORD}")
        secrets.write({"password": NEW_PASSWORD})  # the rotation completes
        admin.execute_command("CLIENT", "KILL", "USER", USER)
        fourth = commit_outbox(admin, PREFIX, range(151, 201), targets=7)
        wait_delivered(relay, out, fourth, "the fourth batch, with the new password")
        wait_until(lambda: relay.readyz()[0] == 200, DELIVERY_TIMEOUT_S, "ready again")
    finally:
        code = relay.stop()

    assert "--redis-password-file" in unreadable
    assert str(password_file) in unreadable
    assert "is empty" in empty
    assert sorted(delivered(out)) == sorted(first | second | third | fourth)
    log = (tmp_path / "relay.log").read_text()
    assert "secret_refused" in log
    assert "secret_reloaded" in log
    assert code == 0, log[-2000:]


def _refused(relay: SweepProcess, path: Path, reason: str = "cannot read") -> str | None:
    status, body = relay.readyz()
    return body if status == 503 and str(path) in body and reason in body else None


# --- TLS: the CA and the certificates replaced together ------------------------------------------


def start_tls_server(pki: Pki, port: int, data: Path) -> subprocess.Popen[bytes]:
    """redis-server with TLS only on ``port``, requiring client certificates signed by ``pki``'s CA."""
    argv = [
        "redis-server", "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
        "--tls-cert-file", str(pki.server_cert), "--tls-key-file", str(pki.server_key),
        "--tls-ca-cert-file", str(pki.ca_cert), "--tls-auth-clients", "yes",
        "--appendonly", "yes", "--save", "", "--dir", str(data), "--loglevel", "warning",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = tls_admin(pki, port)
    try:
        wait_until(lambda: _answers(client, proc), 20, f"TLS redis-server on {port}")
    finally:
        client.close()
    return proc


def tls_admin(pki: Pki, port: int) -> redis.Redis:
    return redis.Redis(
        host="127.0.0.1",
        port=port,
        ssl=True,
        ssl_ca_certs=str(pki.ca_cert),
        ssl_certfile=str(pki.client_cert),
        ssl_keyfile=str(pki.client_key),
        socket_timeout=2.0,
    )


def _answers(client: redis.Redis, proc: subprocess.Popen[bytes]) -> bool:
    assert proc.poll() is None, "redis-server exited"
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False


@pytest.mark.parametrize("mode", MODES)
def test_a_ca_and_certificate_rotation_is_followed_without_a_restart(tmp_path: Path, mode: Mode) -> None:
    now = dt.datetime.now(dt.UTC)
    (tmp_path / "pki-a").mkdir()
    (tmp_path / "pki-b").mkdir()
    old, new = make_pki(tmp_path / "pki-a", now=now), make_pki(tmp_path / "pki-b", now=now)
    data = tmp_path / "data"
    data.mkdir()
    port = pick_ports(1, random.Random())[0]
    material = SecretDir(tmp_path / "tls", mode)
    material.write(
        {"ca.crt": old.ca_cert.read_bytes(), "tls.crt": old.client_cert.read_bytes(),
         "tls.key": old.client_key.read_bytes()}
    )  # fmt: skip
    server = start_tls_server(old, port, data)
    out = tmp_path / "out.jsonl"
    args = [
        "--redis-url", f"rediss://127.0.0.1:{port}/0", "--prefix", PREFIX, "--sink", f"jsonl:{out}",
        "--redis-ca-file", str(material.path("ca.crt")),
        "--redis-cert-file", str(material.path("tls.crt")),
        "--redis-key-file", str(material.path("tls.key")),
    ]  # fmt: skip
    relay = SweepProcess(args, tmp_path / "relay.log")
    try:
        admin = tls_admin(old, port)
        first = commit_outbox(admin, PREFIX, range(1, 101), targets=7)
        admin.close()
        wait_delivered(relay, out, first, "the first batch")

        end_process(server)  # the server comes back with a certificate from a new CA
        material.write(
            {"ca.crt": new.ca_cert.read_bytes(), "tls.crt": new.client_cert.read_bytes(),
             "tls.key": new.client_key.read_bytes()}
        )  # fmt: skip
        server = start_tls_server(new, port, data)
        admin = tls_admin(new, port)
        second = commit_outbox(admin, PREFIX, range(101, 301), targets=7)
        admin.close()
        wait_delivered(relay, out, second, "the second batch, after the CA rotation")
    finally:
        code = relay.stop()
        end_process(server)

    assert sorted(delivered(out)) == sorted(first | second)
    reloaded = {e["option"] for e in relay.events("secret_reloaded")}
    assert reloaded == {"--redis-ca-file", "--redis-cert-file", "--redis-key-file"}
    assert code == 0, (tmp_path / "relay.log").read_text()[-2000:]
