"""Parse and check the ``redis-stream:`` sink target.

Pure: no I/O and no Redis client import, so a spec is checked before anything connects. The
grammar (docs/sinks.md)::

    redis-stream:REDIS_URL?stream=NAME[&maxlen=N]   XADD to a stream; ``{target}`` routes per target

``stream`` and ``maxlen`` are the sink's; any other query parameter stays in the Redis URL for
the client (``relayd.sinks.target_rules.split_redis_target``). Whether plaintext may reach the
destination is the sink's check (``relayd.sinks.spec.check_redis_url``), since it depends on the
options.
"""

from __future__ import annotations

from typing import Final

from relayd.errors import ConfigError
from relayd.sinks.target_rules import positive_int_param, split_redis_target

EXAMPLE: Final = "redis-stream:redis://host?stream=NAME"
#: Query parameters the sink takes for itself; the rest stay in the Redis URL.
PARAMS: Final = ("stream", "maxlen")


def parse_redis_stream_target(text: str) -> tuple[str, dict[str, str]]:
    """Check what follows ``redis-stream:``: the Redis URL (its own query kept) and the sink's
    parameters.

    Raises:
        ConfigError: one line saying what is wrong (an URL's password is never shown).
    """
    url, params = split_redis_target(text, "redis-stream", PARAMS, EXAMPLE)
    stream = params.get("stream", "")
    if not stream:
        raise ConfigError("sink 'redis-stream' needs a stream name: 'redis-stream:REDIS_URL?stream=NAME'")
    if "maxlen" in params:
        positive_int_param(params["maxlen"], "redis-stream", "maxlen")
    return url, params
