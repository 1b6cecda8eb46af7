"""The retrying page (``/retrying``): the entries of a prefix held in backoff now, paged
(``relayd.status.retrying``, the same read as ``relayd status --retrying``)."""

from __future__ import annotations

from typing import Final

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from relayd.console.rendering import templates
from relayd.console.state import chosen_prefix, console_state
from relayd.engine.redis_time import parse_time_reply
from relayd.status.retrying import PageTokenInvalid, read_retrying
from store import Keyspace


async def retrying(request: Request) -> Response:
    client = console_state(request).client
    token = request.query_params.get("page") or None
    # The next attempts are set by the Redis server's clock, as the relay sets them.
    now = parse_time_reply(await client.time())
    try:
        page = await read_retrying(client, Keyspace(chosen_prefix(request)), token)
    except PageTokenInvalid as exc:
        raise HTTPException(400, "invalid page token") from exc
    return templates.TemplateResponse(request, "retrying.html", {"page": page, "now": now})


ROUTES: Final = [Route("/retrying", retrying)]
