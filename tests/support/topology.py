"""Read a Redis Cluster's shape from ``CLUSTER NODES`` / ``CLUSTER INFO`` text (pure, no I/O).

The harness in ``support.cluster`` polls the nodes; the decisions it takes on what they say
(who owns a slot, did a replica take over, is the cluster healthy) are made here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: Number of hash slots in every Redis Cluster.
CLUSTER_SLOTS = 16384


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """One line of ``CLUSTER NODES`` as one node sees the cluster."""

    node_id: str
    port: int
    flags: frozenset[str]
    master_id: str | None
    slots: tuple[tuple[int, int], ...]

    @property
    def is_master(self) -> bool:
        return "master" in self.flags

    @property
    def failed(self) -> bool:
        """The node is marked failing (``fail``) or suspected (``fail?``) by the viewer."""
        return "fail" in self.flags or "fail?" in self.flags

    def owns(self, slot: int) -> bool:
        return any(low <= slot <= high for low, high in self.slots)


def parse_cluster_nodes(text: str) -> list[NodeInfo]:
    """Parse the raw ``CLUSTER NODES`` reply.

    Each line: ``<id> <ip:port@cport[,hostname]> <flags> <master|-> <ping> <pong> <epoch>
    <link> <slot>...``; slots are ``N`` or ``A-B``; importing/migrating markers (``[...]``)
    are ignored, they do not give ownership.
    """
    nodes: list[NodeInfo] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 8:
            continue
        address = fields[1].split("@", 1)[0]
        port = int(address.rsplit(":", 1)[1])
        ranges: list[tuple[int, int]] = []
        for slot in fields[8:]:
            if slot.startswith("["):
                continue
            low, _, high = slot.partition("-")
            ranges.append((int(low), int(high or low)))
        nodes.append(
            NodeInfo(
                node_id=fields[0],
                port=port,
                flags=frozenset(fields[2].split(",")),
                master_id=None if fields[3] == "-" else fields[3],
                slots=tuple(ranges),
            )
        )
    return nodes


def parse_cluster_info(text: str) -> dict[str, str]:
    """Parse ``CLUSTER INFO`` (``key:value`` lines) into a dict."""
    info: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition(":")
        if sep:
            info[key] = value
    return info


def slot_owner(nodes: Iterable[NodeInfo], slot: int) -> NodeInfo | None:
    """The healthy master that serves ``slot`` in this view, or None while nobody does."""
    for node in nodes:
        if node.is_master and not node.failed and node.owns(slot):
            return node
    return None


def failover_done(views: Sequence[Sequence[NodeInfo]], slot: int, dead_port: int) -> int | None:
    """The port of the node every view agrees now serves ``slot``, once it is not ``dead_port``.

    ``views`` holds one ``CLUSTER NODES`` parse per surviving node. None until all of them
    name the same healthy master and that master is not the node that was killed.
    """
    owners = {owner.port if (owner := slot_owner(view, slot)) else None for view in views}
    if len(owners) != 1:
        return None
    (port,) = owners
    if port is None or port == dead_port:
        return None
    return port
