"""Which prefixes relayd relays: the ``--prefix`` list, its ``{shard-0..31}`` ranges, the cluster rule.

Prefixes: ``--prefix`` is repeatable; ``RELAYD_PREFIX`` is comma-separated. A compact range
form expands inside a hash tag: ``{shard-0..31}`` is the 32 prefixes ``{shard-0}`` …
``{shard-31}`` (Redis Cluster deployments that shard one engine over many slots). On a
cluster (``redis+cluster://``) every prefix must carry a hash tag, so all of its keys share one
slot.
"""

from __future__ import annotations

import re
from typing import Final

from store import Keyspace

#: Most prefixes one range form may expand to (a typo like ``0..99999`` is an error, not a hang).
MAX_PREFIX_RANGE: Final = 1024

# "{shard-0..31}": a numeric range inside one hash tag, with fixed text around it.
_RANGE = re.compile(
    r"^(?P<head>[^{}]*)\{(?P<lead>[^{}]*?)(?P<lo>\d+)\.\.(?P<hi>\d+)(?P<tail>[^{}]*)\}(?P<rest>.*)$"
)


def expand_prefixes(values: list[str]) -> tuple[str, ...]:
    """Split comma lists, expand ``{name-0..31}`` ranges, drop duplicates keeping order."""
    out: list[str] = []
    for value in values:
        for item in (v.strip() for v in value.split(",")):
            if not item:
                continue
            match = _RANGE.match(item)
            if match is None:
                expanded = [item]
            else:
                lo, hi = int(match["lo"]), int(match["hi"])
                if hi < lo or hi - lo + 1 > MAX_PREFIX_RANGE:
                    raise ValueError(f"prefix range {item!r} must be lo..hi with at most {MAX_PREFIX_RANGE}")
                expanded = [
                    f"{match['head']}{{{match['lead']}{n}{match['tail']}}}{match['rest']}"
                    for n in range(lo, hi + 1)
                ]
            for prefix in expanded:
                Keyspace(prefix)  # raises ValueError on an empty or whitespace-bearing prefix
                if prefix not in out:
                    out.append(prefix)
    if not out:
        raise ValueError("at least one prefix is required")
    return tuple(out)


def require_hash_tags(prefixes: tuple[str, ...]) -> None:
    """On a cluster every key of a prefix must hash to one slot: the scripts touch several at once."""
    untagged = [prefix for prefix in prefixes if not Keyspace(prefix).has_hash_tag]
    if untagged:
        raise ValueError(
            f"on Redis Cluster every prefix needs a hash tag such as '{{shard-7}}x', so all its keys "
            f"share one slot; {untagged[0]!r} has none"
        )
