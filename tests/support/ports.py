"""Free loopback ports for the servers the tests start: any one, or pairs for cluster nodes."""

from __future__ import annotations

import random
import socket

#: A Redis Cluster node's bus listens on its port plus this offset (fixed by Redis).
BUS_PORT_OFFSET = 10000
#: Ports are drawn from here: a port and its cluster bus port (+10000) both stay below the
#: kernel's ephemeral range (32768+), so an outgoing connection never squats on them.
PORT_RANGE = (10000, 22000)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the kernel's pick; a server binds it next)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_free(port: int) -> bool:
    """True when ``port`` can be bound on 127.0.0.1 right now."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def pick_ports(count: int, rng: random.Random) -> list[int]:
    """Draw ``count`` distinct ports whose own and bus ports (+10000) are all free.

    Random draws keep parallel test workers (xdist) from racing for the same ports.
    """
    chosen: list[int] = []
    taken: set[int] = set()
    for _ in range(count * 200):
        port = rng.randrange(*PORT_RANGE)
        pair = {port, port + BUS_PORT_OFFSET}
        if pair & taken or not all(port_free(p) for p in pair):
            continue
        chosen.append(port)
        taken |= pair
        if len(chosen) == count:
            return chosen
    raise RuntimeError(f"could not find {count} free port pairs in {PORT_RANGE}")
