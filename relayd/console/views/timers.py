"""The timers page (``/timers``): the next ones by fire time, or one execution's, searched."""

from __future__ import annotations

from typing import Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from relayd.console.reads import read_timers
from relayd.console.rendering import templates
from relayd.console.state import chosen_prefix, console_state
from relayd.engine.redis_time import parse_time_reply
from store import Keyspace

#: Timers listed per page.
TIMER_PAGE: Final = 100


async def timers(request: Request) -> Response:
    execution = (request.query_params.get("execution") or "").strip() or None
    cursor_text = request.query_params.get("cursor", "0")
    client = console_state(request).client
    # Due or not by the Redis server's clock, as the relay decides it, not this host's.
    now = parse_time_reply(await client.time())
    view = await read_timers(
        client,
        Keyspace(chosen_prefix(request)),
        now=now,
        limit=TIMER_PAGE,
        execution=execution,
        cursor=int(cursor_text) if cursor_text.isdigit() else 0,
    )
    return templates.TemplateResponse(
        request, "timers.html", {"view": view, "execution": execution or "", "now": now}
    )


ROUTES: Final = [Route("/timers", timers)]
