"""The empty-prefix hint on a real Redis Cluster: its bounded ``SCAN`` walks every primary, so
prefixes whose hash tags put them on different nodes are all named."""

from __future__ import annotations

import uuid

import pytest
import redis.asyncio.cluster as aiocluster
from redis.cluster import RedisCluster as ClusterClient
from support.cluster import RedisCluster

from relayd.status.prefix_hint import prefix_hints, scan_prefixes

pytestmark = pytest.mark.cluster


def _one_prefix_per_primary(client: ClusterClient) -> list[str]:
    """A hash-tagged prefix on each primary, so one node's walk cannot find them all."""
    run = uuid.uuid4().hex[:8]
    by_node: dict[str, str] = {}
    for n in range(1000):
        prefix = f"{{h{n}}}{run}"
        by_node.setdefault(client.get_node_from_key(prefix).name, prefix)
    return sorted(by_node.values())


async def test_the_scan_names_prefixes_on_every_primary(
    redis_cluster: RedisCluster, cluster_client: ClusterClient, async_cluster_client: aiocluster.RedisCluster
) -> None:
    prefixes = _one_prefix_per_primary(cluster_client)
    for prefix in prefixes:
        cluster_client.incr(f"{prefix}:outbox:seq")
    empty = f"{{empty}}{uuid.uuid4().hex[:8]}"

    found = await scan_prefixes(async_cluster_client)
    hints = await prefix_hints(async_cluster_client, [empty])

    assert len(prefixes) == redis_cluster.masters
    assert set(prefixes) <= found
    assert len(hints) == 1
    assert hints[0].startswith(f"no keys under prefix {empty!r}; found keys under ")
