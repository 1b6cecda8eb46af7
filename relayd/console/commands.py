"""The ``relayd dlq`` command equivalent to a console action, shown beside it and in the audit. Pure.

Only the prefix is named: the Redis URL and credentials come from the operator's own
environment (``RELAYD_REDIS_URL``...), so the text never carries a secret.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Final

from relayd.console.filters import DeadLetterFilter

#: Most ids spelled out in one command (beyond, the command says how many and where they are).
MAX_IDS_SHOWN: Final = 20


def replay_command(prefix: str, wanted: DeadLetterFilter, ids: Sequence[str] = ()) -> str:
    """``relayd dlq replay`` for explicit ids, a whole kind, or everything."""
    head = ["relayd", "dlq", "replay", "--prefix", prefix]
    if ids:
        shown = list(ids[:MAX_IDS_SHOWN])
        text = shlex.join([*head, *shown])
        if len(ids) > MAX_IDS_SHOWN:
            text += f"  # and {len(ids) - MAX_IDS_SHOWN} more ids (see the audit record)"
        return text
    if not wanted.narrows_within_kind:
        return shlex.join([*head, "--kind", wanted.kind] if wanted.kind else [*head, "--all"])
    # The CLI selects by id or kind only: a narrower filter is listed, then replayed by id.
    listing = shlex.join(["relayd", "dlq", "list", "--prefix", prefix, "--json"])
    return f"{listing}  # then replay the ids matching: {wanted.describe()}"


def purge_command(prefix: str, wanted: DeadLetterFilter) -> str:
    args = ["relayd", "dlq", "purge", "--prefix", prefix]
    if wanted.kind:
        args += ["--kind", wanted.kind]
    return shlex.join([*args, "--yes"])
