"""The overview (``/``) and its live updates (``/events``), both from the one shared poller."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Final

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from relayd.console.rendering import templates
from relayd.console.state import console_state

#: Seconds between keep-alive comments on an idle event stream.
PING_S: Final = 15


async def overview(request: Request) -> Response:
    snapshot = await console_state(request).poller.current()
    return templates.TemplateResponse(request, "overview.html", {"snapshot": snapshot})


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
                yield ServerSentEvent(
                    data=fragment.render(snapshot=snapshot).replace("\n", " "), event="overview"
                )

    return EventSourceResponse(stream(), ping=PING_S)


ROUTES: Final = [Route("/", overview), Route("/events", events)]
