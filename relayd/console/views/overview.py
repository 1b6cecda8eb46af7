"""The overview (``/``) and its live updates (``/events``), both from the one shared poller.

Every prefix, a summary table first (unhealthy first), then a card each; ``?prefix=P`` (the
prefix selector) narrows both to that prefix.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Final
from urllib.parse import quote

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from relayd.console.poller import Snapshot
from relayd.console.rendering import templates
from relayd.console.state import console_state

#: Seconds between keep-alive comments on an idle event stream.
PING_S: Final = 15


def _narrowed(request: Request, snapshot: Snapshot) -> Snapshot:
    """Only the prefix the query names, when this console serves it; else every prefix."""
    only = request.query_params.get("prefix")
    if only not in console_state(request).prefixes:
        return snapshot
    return dataclasses.replace(snapshot, prefixes=[p for p in snapshot.prefixes if p.report.prefix == only])


async def overview(request: Request) -> Response:
    snapshot = _narrowed(request, await console_state(request).poller.current())
    only = request.query_params.get("prefix")
    live = f"/events?prefix={quote(only)}" if only in console_state(request).prefixes else "/events"
    return templates.TemplateResponse(request, "overview.html", {"snapshot": snapshot, "live": live})


async def events(request: Request) -> Response:
    """Each new snapshot as the overview's body (``_overview.html``), one server-sent event each."""
    poller = console_state(request).poller
    fragment = templates.get_template("_overview.html")

    async def stream() -> AsyncIterator[ServerSentEvent]:
        # aclosing: a page that goes away unsubscribes at once, not when its generator is collected.
        async with contextlib.aclosing(poller.subscribe()) as snapshots:
            async for snapshot in snapshots:
                if await request.is_disconnected():
                    return
                shown = _narrowed(request, snapshot)
                yield ServerSentEvent(
                    data=fragment.render(snapshot=shown).replace("\n", " "), event="overview"
                )

    return EventSourceResponse(stream(), ping=PING_S)


ROUTES: Final = [Route("/", overview), Route("/events", events)]
