"""A listener that cannot bind its address (metrics, console, demo) is exit 2 and one line naming
the address, never a traceback: shown with a real socket holding the port."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import run_relayd


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port another listener holds for the test's duration."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield int(sock.getsockname()[1])


def _assert_one_line_naming(result_stderr: str, port: int, what: str) -> None:
    lines = result_stderr.strip().splitlines()
    assert len(lines) == 1, result_stderr
    assert "Traceback" not in result_stderr
    assert lines[0].startswith("relayd: error: cannot listen on "), lines
    assert f"127.0.0.1:{port}" in lines[0]
    assert what in lines[0]
    assert "address already in use" in lines[0]


def test_sweep_on_a_busy_metrics_port_exits_2_naming_the_address(redis_server, busy_port: int) -> None:
    """A second replica on the same metrics port: exit 2, one line, before it relays anything."""
    result = run_relayd(
        "sweep",
        "--redis-url",
        redis_server.url,
        "--prefix",
        "busy-metrics",
        "--sink",
        "null",
        "--metrics-addr",
        f"127.0.0.1:{busy_port}",
        timeout_s=60,
    )

    assert result.returncode == 2, result.stderr
    _assert_one_line_naming(result.stderr, busy_port, "metrics endpoint")


def test_console_on_a_busy_port_exits_2_naming_the_address(redis_server, busy_port: int) -> None:
    result = run_relayd(
        "console", "--redis-url", redis_server.url, "--console-addr", f"127.0.0.1:{busy_port}", timeout_s=60
    )

    assert result.returncode == 2, result.stderr
    _assert_one_line_naming(result.stderr, busy_port, "console")


def test_demo_on_a_busy_metrics_port_exits_2_naming_the_address(busy_port: int) -> None:
    result = run_relayd("demo", "--duration", "3", "--metrics-addr", f"127.0.0.1:{busy_port}", timeout_s=60)

    assert result.returncode == 2, result.stderr
    _assert_one_line_naming(result.stderr, busy_port, "metrics endpoint")
