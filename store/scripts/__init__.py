"""The store's Lua scripts, loaded once from the package with importlib.resources.

Every script declares each key it touches in KEYS (none is built inside Lua), so it runs on
Redis Cluster when the prefix carries a hash tag.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Final


def _load(name: str) -> str:
    return files(__name__).joinpath(f"{name}.lua").read_text(encoding="utf-8")


#: Fast-path commit: version CAS + SET + optional dedupe SADD.
CAS_COMMIT: Final = _load("cas_commit")
#: Timer compare-and-delete over (member, fire_at) pairs, optionally fenced.
TIMER_COMPARE_DELETE: Final = _load("timer_compare_delete")
#: HDEL of hash fields while a guard key holds the caller's token (``store.fence``).
FENCED_HDEL: Final = _load("fenced_hdel")

#: The error tag the CAS script replies with on a version mismatch.
CONFLICT_TAG: Final = "RELAYD_STORE_CONFLICT:"
