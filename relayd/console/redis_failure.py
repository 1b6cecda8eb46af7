"""The console's page when Redis fails a read: 503 and why, never a bare "Internal Server Error".

Two causes an operator can act on: Redis does not answer (the page retries by itself, so it
recovers when Redis is back), or it refuses a command to the console's user (an ACL that lacks
it: ``relayd acl`` prints the rule the console needs). Pure: an exception in, a sentence out.
"""

from __future__ import annotations

from typing import Final

from redis.exceptions import NoPermissionError

#: Seconds after which a 503 page asks again (``Retry-After`` and a refresh).
RETRY_AFTER_S: Final = 5


def redis_failure(exc: BaseException) -> str:
    """One sentence saying why the page could not be read; no URL, no credential."""
    if isinstance(exc, NoPermissionError):
        first_line = (str(exc).splitlines() or [""])[0][:200]
        return (
            f"Redis refused a command to the console's user ({first_line}); "
            "grant it the rule that `relayd acl` prints"
        )
    return (
        f"Redis is unreachable ({type(exc).__name__}); "
        f"this page tries again every {RETRY_AFTER_S} s and recovers once Redis answers"
    )
