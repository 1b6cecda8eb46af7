"""Port picking for the servers the tests start, and the guard against a port taken meanwhile."""

from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support.cluster import ClusterNode, PortTaken, _answers
from support.ports import BUS_PORT_OFFSET, PORT_RANGE, pick_ports, port_free

if TYPE_CHECKING:
    from support.redis_server import RedisServer


def test_picked_ports_and_their_bus_ports_are_distinct_and_free() -> None:
    ports = pick_ports(6, random.Random(3))

    everything = {*ports, *(p + BUS_PORT_OFFSET for p in ports)}
    assert len(everything) == 12
    assert all(PORT_RANGE[0] <= p < PORT_RANGE[1] for p in ports)
    assert all(port_free(p) for p in everything)


def test_a_node_whose_port_is_held_by_another_server_is_detected(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """The node's own process must answer: another server on its port raises PortTaken."""
    node = ClusterNode(port=redis_server.port, dir=tmp_path / "node")
    node.start()

    try:
        # whether our process has already exited or not, the server answering is not ours
        with pytest.raises(PortTaken):
            _answers(node)
    finally:
        node.kill()
