"""Fixtures for the store on a real Redis Cluster: one 3-master, 3-replica cluster per session.

The cluster is started once per test process (each xdist worker that runs a cluster test
starts its own; about two seconds). Tests isolate by prefix; every prefix carries the hash tag
``{shard-7}`` so all of its keys share a slot, as relayd requires on a cluster.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio.cluster as aiocluster
from redis.cluster import RedisCluster as ClusterClient
from support.binaries import require_binaries
from support.cluster import RedisCluster

#: The hash tag every cluster test prefix starts with.
HASH_TAG = "{shard-7}"


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    """3 masters with one replica each, on loopback; removed at the end of the session."""
    require_binaries("redis-server", "redis-cli")
    cluster = RedisCluster(masters=3, replicas=1)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster_prefix() -> str:
    """A unique prefix per test that keeps every key in the ``{shard-7}`` slot."""
    return f"{HASH_TAG}t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def cluster_client(redis_cluster: RedisCluster) -> Iterator[ClusterClient]:
    client = redis_cluster.client()
    yield client
    client.close()


@pytest.fixture
async def async_cluster_client(redis_cluster: RedisCluster) -> AsyncIterator[aiocluster.RedisCluster]:
    client = aiocluster.RedisCluster(host="127.0.0.1", port=redis_cluster.seed_port)
    yield client
    await client.aclose()
