"""Whether a sink may still send: the engine's lease check, visible inside ``Sink.deliver``.

The engine checks its lease's local deadline before it hands a batch to a sink, but a batch
sent entry by entry can outlive that check: a process paused mid-batch resumes with requests
still queued. While the engine runs a ``deliver`` call, ``may_send()`` answers whether the
lease is still counted as ours; a sink that sends one request at a time asks it before each
request and reports the ones it did not send as ``Retry(error=NOT_SENT)`` (the engine acks
nothing after the deadline, so they stay in Redis for the replica that holds the lease now).
Outside a delivery (tests, tools) it is always true. A context variable carries it, so tasks a
sink starts inside ``deliver`` see the check of the batch they serve.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final

#: The error text of an entry a sink did not send because the lease may have expired.
NOT_SENT: Final = "not sent: this replica's lease may have expired"

_check: ContextVar[Callable[[], bool] | None] = ContextVar("relayd_may_send", default=None)


def may_send() -> bool:
    """Whether the replica delivering the current batch still holds its lease (True outside one)."""
    check = _check.get()
    return check is None or check()


@contextmanager
def sending_while(check: Callable[[], bool]) -> Iterator[None]:
    """Let the sink code inside the block ask ``check`` through ``may_send()``."""
    token = _check.set(check)
    try:
        yield
    finally:
        _check.reset(token)
