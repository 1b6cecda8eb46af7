"""Parse and check the ``harel:`` sink target.

Pure: no I/O and no Redis client import, so a spec is checked before anything connects. The
grammar (docs/harel.md)::

    harel:REDIS_URL[?store=URL&definitions=DIR&…]   publish into harel's own transport

``store``, ``definitions``, ``handoff_delay``, ``timer_grace``, ``timer_hold`` and
``max_connections`` are the sink's; any other query parameter stays in the Redis URL for the
client (``relayd.sinks.target_rules.split_redis_target``). Whether plaintext may reach either
Redis is the sink's check, since it depends on the options.
"""

from __future__ import annotations

from typing import Final

from relayd.errors import ConfigError
from relayd.sinks.target_rules import (
    REDIS_SCHEMES,
    check_redis_form,
    positive_int_param,
    seconds_param,
    split_redis_target,
)

EXAMPLE: Final = "harel:redis://host:6379/0"
#: Query parameters the sink takes for itself; the rest stay in the Redis URL.
PARAMS: Final = (
    "store", "definitions", "handoff_delay", "timer_grace", "timer_hold", "max_connections"
)  # fmt: skip
#: The sink's parameters in seconds, and the most each may be.
SECONDS: Final = {"handoff_delay": 600.0, "timer_grace": 600.0, "timer_hold": 3600.0}


def parse_harel_target(text: str) -> tuple[str, dict[str, str]]:
    """Check what follows ``harel:``: the transport's Redis URL (its own query kept) and the
    sink's parameters.

    Raises:
        ConfigError: one line saying what is wrong (an URL's password is never shown).
    """
    url, params = split_redis_target(text, "harel", PARAMS, EXAMPLE)
    if "store" in params:
        if params["store"].partition("://")[0].lower() not in REDIS_SCHEMES:
            raise ConfigError("sink 'harel' needs a redis:// or rediss:// store URL")
        check_redis_form(params["store"], "harel")
    if "max_connections" in params:
        positive_int_param(params["max_connections"], "harel", "max_connections")
    for name, most in SECONDS.items():
        if name in params:
            seconds_param(params[name], "harel", name, most)
    if params.get("definitions") == "":
        raise ConfigError("sink 'harel': definitions needs a directory (harel's HAREL_DEFINITIONS_DIR)")
    return url, params
