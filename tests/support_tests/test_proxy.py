"""The TCP proxy: traffic passes, is cut (refused) or blackholed (held), switchable at runtime."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from support.proxy import TcpProxy

if TYPE_CHECKING:
    from support.redis_server import RedisServer

PING = b"*1\r\n$4\r\nPING\r\n"


@pytest.fixture
def proxy(redis_server: RedisServer) -> Iterator[TcpProxy]:
    with TcpProxy(redis_server.port) as running:
        yield running


def _client(proxy: TcpProxy, timeout_s: float = 0.5) -> redis.Redis:
    # no retries: each call shows what one attempt through the proxy does
    return redis.Redis(port=proxy.port, socket_timeout=timeout_s, retry=Retry(NoBackoff(), 0))


def _raw(proxy: TcpProxy, timeout_s: float = 0.3) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=timeout_s)
    sock.settimeout(timeout_s)
    return sock


def test_pass_forwards_commands_both_ways(proxy: TcpProxy) -> None:
    """In ``pass`` mode a client through the proxy talks to redis-server."""
    client = _client(proxy)

    client.set("proxy-probe", "1")

    assert client.get("proxy-probe") == b"1"
    assert proxy.accepted == 1
    client.close()


def test_cut_drops_open_connections_and_refuses_new_ones(proxy: TcpProxy) -> None:
    """``cut`` resets live connections, refuses connects, and ``pass`` heals on the same port."""
    client = _client(proxy)
    assert client.ping()

    proxy.set_mode("cut")

    with pytest.raises(redis.ConnectionError):
        client.ping()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=0.5)
    assert proxy.open_connections == 0

    proxy.set_mode("pass")

    assert client.ping()
    client.close()


def test_blackhole_accepts_but_answers_nothing(proxy: TcpProxy) -> None:
    """A blackholed command times out; a new connect is accepted and then hears nothing."""
    client = _client(proxy, timeout_s=0.3)
    assert client.ping()

    proxy.set_mode("blackhole")

    with pytest.raises(redis.TimeoutError):
        client.ping()
    sock = _raw(proxy)
    sock.sendall(PING)
    with pytest.raises(TimeoutError):
        sock.recv(64)
    sock.close()
    client.close()


def test_blackholed_bytes_are_released_when_traffic_passes_again(proxy: TcpProxy) -> None:
    """What was sent into the blackhole arrives once the proxy passes again (a healed partition)."""
    proxy.set_mode("blackhole")
    sock = _raw(proxy, timeout_s=2.0)
    sock.sendall(PING)

    proxy.set_mode("pass")

    assert sock.recv(64) == b"+PONG\r\n"
    sock.close()


def test_connections_beyond_the_bound_are_closed_on_accept(redis_server: RedisServer) -> None:
    """With ``max_connections=2`` a third connection is closed at once and counted."""
    with TcpProxy(redis_server.port, max_connections=2) as proxy:
        first, second = _raw(proxy), _raw(proxy)
        first.sendall(PING)
        second.sendall(PING)
        assert first.recv(64) == b"+PONG\r\n"
        assert second.recv(64) == b"+PONG\r\n"

        third = _raw(proxy)

        assert third.recv(64) == b""
        assert proxy.rejected == 1
        for sock in (first, second, third):
            sock.close()


def test_stop_closes_connections_listener_and_thread(redis_server: RedisServer) -> None:
    """``stop`` leaves nothing behind: live connections see EOF, the port refuses, the thread ends."""
    proxy = TcpProxy(redis_server.port)
    proxy.start()
    sock = _raw(proxy)
    sock.sendall(PING)
    assert sock.recv(64) == b"+PONG\r\n"
    threads_before = {t.name for t in threading.enumerate()}

    proxy.stop()

    assert "tcp-proxy" in threads_before
    assert "tcp-proxy" not in {t.name for t in threading.enumerate()}
    assert sock.recv(64) == b""
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=0.5)
    sock.close()
    proxy.stop()


def test_a_proxy_can_start_cut_and_open_later(redis_server: RedisServer) -> None:
    """Starting in ``cut`` reserves the port but refuses until the test lets traffic pass."""
    with TcpProxy(redis_server.port, mode="cut") as proxy:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", proxy.port), timeout=0.5)

        proxy.set_mode("pass")

        client = _client(proxy)
        assert client.ping()
        client.close()


def test_unknown_mode_is_refused(proxy: TcpProxy) -> None:
    with pytest.raises(ValueError, match="unknown proxy mode"):
        proxy.set_mode("drop")  # type: ignore[arg-type]
    assert proxy.mode == "pass"
