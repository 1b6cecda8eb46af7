"""The Dockerfile, built and run for real: on a private dockerd from Debian's docker.io, over a
stand-in base image made with debootstrap (no registry can be reached; docs/image.md).

Every container runs as the image's own user (UID 10001) with ``--read-only --cap-drop ALL
--security-opt no-new-privileges`` and the host network (the daemon has no bridge), against a
redis-server on loopback. One test does it all, so one xdist worker pays for one debootstrap
and one build; each step says which it is when it fails.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from support.binaries import require_binaries
from support.docker import DOCKER, PrivateDockerd, apt_sources, debian_mirror, import_rootfs, make_base_rootfs
from support.redis_server import RedisServer, free_port, start_redis_server

ROOT = Path(__file__).resolve().parents[2]
BASE_TAG = "relayd-test-base:bookworm"
IMAGE_TAG = "relayd:under-test"
LOCKED_DOWN = ("--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--network", "host")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def dockerd() -> Iterator[PrivateDockerd]:
    require_binaries("dockerd", "debootstrap", "containerd", "runc")
    if not Path(DOCKER).is_file():
        pytest.skip(f"{DOCKER} missing (scripts/install-system-packages.sh installs docker.io)")
    daemon = PrivateDockerd()
    daemon.start()
    try:
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="module")
def image(dockerd: PrivateDockerd, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The Dockerfile built over a debootstrapped base; prints how long each part took and the size."""
    rootfs = tmp_path_factory.mktemp("base") / "rootfs"
    began = time.monotonic()
    try:
        make_base_rootfs(rootfs, debian_mirror(apt_sources()))
        import_rootfs(dockerd, rootfs, BASE_TAG)
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)  # imported: the daemon holds it now
    based = time.monotonic()
    dockerd.docker(
        "build", "--network", "host", "--build-arg", f"PYTHON_IMAGE={BASE_TAG}", "-t", IMAGE_TAG, str(ROOT),
        timeout_s=900,
    )  # fmt: skip
    size = int(dockerd.docker("image", "inspect", "--format", "{{.Size}}", IMAGE_TAG).stdout)
    print(
        f"\nbase image {based - began:.0f} s (debootstrap + import), build {time.monotonic() - based:.0f} s,"
        f" image size {size / 1e6:.1f} MB"
    )
    return IMAGE_TAG


@pytest.fixture
def loopback_redis() -> Iterator[RedisServer]:
    server = start_redis_server()
    yield server
    server.cleanup()


def test_the_dockerfile_needs_no_frontend_image() -> None:
    """A ``# syntax=`` line makes BuildKit pull a frontend image: an offline build fails."""
    lines = (ROOT / "Dockerfile").read_text().splitlines()

    assert not [line for line in lines if line.replace(" ", "").lower().startswith("#syntax=")]


def test_the_image_builds_offline_and_runs_locked_down(
    dockerd: PrivateDockerd, image: str, loopback_redis: RedisServer
) -> None:
    """--help, demo, sweep --once acking a backlog, and a sweep that is healthy and stops cleanly."""
    client = loopback_redis.client()
    assert (
        dockerd.docker("image", "inspect", "--format", "{{.Config.User}}", image).stdout.strip()
        == "10001:10001"
    )

    shown = _run(dockerd, image, "--help")
    assert (shown.returncode, "sweep" in shown.stdout) == (0, True), f"step --help: {shown.stderr[-1500:]}"

    demo = _run(dockerd, image, "demo", "--duration", "3", timeout_s=120)
    said = demo.stdout + demo.stderr
    assert demo.returncode == 0, f"step demo: {said[-1500:]}"
    assert "every committed entry that came due was delivered" in said, f"step demo: {said[-1500:]}"

    prefix = "img" + uuid.uuid4().hex[:8]
    _seed(client, prefix, outbox=5)
    once = _run(dockerd, image, *_sweep_args(loopback_redis, prefix), "--once", timeout_s=120)
    assert once.returncode == 0, f"step sweep --once: {once.stderr[-1500:]}"
    assert _pending(client, prefix) == (0, 0, 0), "step sweep --once: entries left unacked"

    _check_long_running_sweep(dockerd, image, loopback_redis, prefix)


def _check_long_running_sweep(dockerd: PrivateDockerd, image: str, server: RedisServer, prefix: str) -> None:
    """Healthy by the image's own HEALTHCHECK (probed every 2 s instead of 30 s), relaying
    what is committed while it runs, answering as UID 10001, and exit 0 on ``docker stop``."""
    client = server.client()
    name = f"relayd-test-{uuid.uuid4().hex[:8]}"
    metrics = f"127.0.0.1:{free_port()}"
    dockerd.docker(
        "run", "-d", "--name", name, *LOCKED_DOWN,
        "--health-interval", "2s", "--health-start-period", "60s", "--health-timeout", "5s",
        "-e", f"RELAYD_METRICS_ADDR={metrics}",
        image, *_sweep_args(server, prefix),
    )  # fmt: skip
    try:

        def healthy() -> bool:
            return _inspect(dockerd, name, "{{.State.Health.Status}}") == "healthy"

        try:
            _wait_for(healthy, 120, "healthy")
        except AssertionError as exc:  # say why: the probes' own output and the container's log
            health = _inspect(dockerd, name, "{{json .State.Health}}")[-1500:]
            log = dockerd.docker("logs", name).stderr[-1500:]
            raise AssertionError(f"{exc}: {health}; log: {log}") from None
        _seed(client, prefix, outbox=3, first_seq=100)
        _wait_for(lambda: _pending(client, prefix) == (0, 0, 0), 60, "relaying while it runs")
        uid = dockerd.docker("exec", name, "python", "-c", "import os; print(os.getuid(), os.getgid())")
        assert uid.stdout.split() == ["10001", "10001"]

        dockerd.docker("stop", "--time", "30", name, timeout_s=90)

        assert _inspect(dockerd, name, "{{.State.ExitCode}}") == "0", dockerd.docker("logs", name).stderr[
            -2000:
        ]
    finally:
        dockerd.docker("rm", "-f", name, check=False)


def _sweep_args(server: RedisServer, prefix: str) -> list[str]:
    return ["sweep", "--redis-url", server.url, "--prefix", prefix, "--sink", "log"]


def _run(
    dockerd: PrivateDockerd, image: str, *args: str, timeout_s: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """One container to completion; metrics on a free loopback port (the host network is shared)."""
    metrics = f"RELAYD_METRICS_ADDR=127.0.0.1:{free_port()}"
    return dockerd.docker(
        "run", "--rm", *LOCKED_DOWN, "-e", metrics, image, *args, timeout_s=timeout_s, check=False
    )


def _seed(client: redis.Redis, prefix: str, *, outbox: int, first_seq: int = 1) -> None:
    """Outbox rows, a spawn and a due timer as an engine commits them (docs/internals.md#key-space)."""
    last = first_seq + outbox - 1
    pipe = client.pipeline(transaction=True)
    for seq in range(first_seq, last + 1):
        event = json.dumps({"id": f"ev-{seq}", "kind": "Ping", "data": {"n": seq}})
        pipe.hset(f"{prefix}:outbox", str(seq), json.dumps({"t": "exe-1", "e": event}))
    pipe.hset(
        f"{prefix}:spawns", str(first_seq), json.dumps({"p": "exe-1", "c": "exe-1:c", "r": "r", "x": {}})
    )
    pipe.zadd(f"{prefix}:timers", {f"exe-1\x00wait{first_seq}": time.time() - 1})
    pipe.set(f"{prefix}:outbox:seq", last)
    pipe.set(f"{prefix}:spawns:seq", first_seq)
    pipe.execute()


def _pending(client: redis.Redis, prefix: str) -> tuple[int, int, int]:
    return (
        client.hlen(f"{prefix}:outbox"),
        client.hlen(f"{prefix}:spawns"),
        client.zcard(f"{prefix}:timers"),
    )


def _inspect(dockerd: PrivateDockerd, name: str, template: str) -> str:
    return dockerd.docker("inspect", "--format", template, name, check=False).stdout.strip()


def _wait_for(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} within {timeout_s:.0f} s")
        time.sleep(0.5)
