"""Refuse a ``RELAYD_*`` environment variable relayd does not know: a typo must not go unnoticed.

A misspelt variable (``RELAYD_SINKS`` for ``RELAYD_SINK``) would otherwise be ignored and its
option left at its default. ``unknown_variable_error`` is pure: given the environment and the
names that are known, it returns the one line to stop on (naming the closest known variable) or
None. Known are every option's variable (``Settings``, the sinks' own options, each command's
own, which the CLI passes in), ``RELAYD_<NAME>_<KEY>`` of a plugin sink ``NAME``, and
``RELAYD_ALLOW_UNKNOWN_ENV`` itself: a comma-separated list of variables meant for something
else (``*``: any), which are let through. The service links Kubernetes sets for a Service named
``relayd`` (``RELAYD_SERVICE_HOST``, ``RELAYD_PORT_9464_TCP``, ...) are let through too.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Mapping
from typing import Final

#: Every relayd variable starts so; anything else in the environment is not relayd's business.
VARIABLE_PREFIX: Final = "RELAYD_"
#: The escape: variables meant for something else, comma-separated (``*``: every one).
ALLOW_UNKNOWN: Final = "RELAYD_ALLOW_UNKNOWN_ENV"
#: What Kubernetes sets in every pod of a namespace with a Service named ``relayd`` (its
#: service links: ``RELAYD_SERVICE_HOST``, ``RELAYD_PORT_9464_TCP_ADDR``, ...): never an option.
SERVICE_LINK: Final = re.compile(
    r"RELAYD_(SERVICE_HOST|SERVICE_PORT(_\w+)?|PORT(_\d+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)?)"
)


def unknown_variable_error(
    env: Mapping[str, str],
    known: Collection[str],
    plugin_prefixes: Callable[[], Collection[str]] = tuple,
) -> str | None:
    """The line naming the first unknown ``RELAYD_*`` variable of ``env``, or None when all are known.

    ``plugin_prefixes`` returns the plugin sinks' names (``pigeon`` owns ``RELAYD_PIGEON_*``);
    it is called only when a variable is not in ``known``.
    """
    allowed = {name.strip().upper() for name in env.get(ALLOW_UNKNOWN, "").split(",") if name.strip()}
    if "*" in allowed:
        return None
    known_upper = {name.upper() for name in known} | {ALLOW_UNKNOWN}
    candidates = sorted(
        name.upper()
        for name in env
        if name.upper().startswith(VARIABLE_PREFIX)
        and name.upper() not in known_upper | allowed
        and not SERVICE_LINK.fullmatch(name.upper())
    )
    if not candidates:
        return None
    owned = tuple(f"{VARIABLE_PREFIX}{p.upper().replace('-', '_')}_" for p in plugin_prefixes())
    unknown = [name for name in candidates if not name.startswith(owned)] if owned else candidates
    if not unknown:
        return None
    name = unknown[0]
    close = difflib.get_close_matches(name, sorted(known_upper - {ALLOW_UNKNOWN}), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return (
        f"unknown environment variable {name}{hint}; if it is meant for something else, "
        f"list it in {ALLOW_UNKNOWN}"
    )
