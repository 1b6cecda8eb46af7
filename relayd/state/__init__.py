"""Everything relayd keeps under ``P:relay:``: lease, attempt counts, dead letters."""

from __future__ import annotations

from typing import TypeAlias

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

#: The clients relayd runs on: a single node (or fakeredis) or a Redis Cluster.
RedisClient: TypeAlias = aioredis.Redis | RedisCluster
