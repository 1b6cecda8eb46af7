"""Reading a cluster's shape from CLUSTER NODES / CLUSTER INFO, and deciding a failover is done."""

from __future__ import annotations

from support.topology import NodeInfo, failover_done, parse_cluster_info, parse_cluster_nodes, slot_owner

NODES = """\
a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460
a2 127.0.0.1:7002@17002 master - 0 1 2 connected 5461-10922 [5000->-a1]
a3 127.0.0.1:7003@17003,host3 master - 0 1 3 connected 10923-16383
b1 127.0.0.1:7004@17004 slave a1 0 1 1 connected
"""

AFTER_FAILOVER = """\
a1 127.0.0.1:7001@17001 master,fail - 0 0 1 disconnected
a2 127.0.0.1:7002@17002 myself,master - 0 1 2 connected 5461-10922
a3 127.0.0.1:7003@17003 master - 0 1 3 connected 10923-16383
b1 127.0.0.1:7004@17004 master - 0 1 4 connected 0-5460
"""


def _port(node: NodeInfo | None) -> int | None:
    return None if node is None else node.port


def test_nodes_are_parsed_with_ports_flags_masters_and_slot_ranges() -> None:
    nodes = parse_cluster_nodes(NODES)

    assert [n.port for n in nodes] == [7001, 7002, 7003, 7004]
    assert nodes[0].flags == {"myself", "master"}
    assert nodes[1].slots == ((5461, 10922),)  # the migration marker gives no ownership
    assert (nodes[3].is_master, nodes[3].master_id) == (False, "a1")


def test_slot_owner_is_the_healthy_master_serving_it() -> None:
    before, after = parse_cluster_nodes(NODES), parse_cluster_nodes(AFTER_FAILOVER)

    assert _port(slot_owner(before, 0)) == 7001
    assert _port(slot_owner(before, 16383)) == 7003
    assert _port(slot_owner(after, 42)) == 7004
    assert slot_owner(parse_cluster_nodes(AFTER_FAILOVER.replace("0-5460\n", "\n")), 42) is None


def test_failover_is_done_only_when_every_view_agrees_on_a_new_owner() -> None:
    before, after = parse_cluster_nodes(NODES), parse_cluster_nodes(AFTER_FAILOVER)

    assert failover_done([after, after], slot=7, dead_port=7001) == 7004
    assert failover_done([after, before], slot=7, dead_port=7001) is None
    assert failover_done([before, before], slot=7, dead_port=7001) is None


def test_cluster_info_lines_become_a_dict() -> None:
    info = parse_cluster_info("cluster_state:ok\r\ncluster_known_nodes:6\r\n")

    assert info == {"cluster_state": "ok", "cluster_known_nodes": "6"}
