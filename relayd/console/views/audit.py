"""The audit page (``/audit``): this console's replays, and the actions recorded for the prefix."""

from __future__ import annotations

from typing import Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from relayd.console.rendering import templates
from relayd.console.state import chosen_prefix, console_state
from relayd.state.audit import read_actions
from store import Keyspace


async def audit(request: Request) -> Response:
    state = console_state(request)
    prefix = chosen_prefix(request)
    records = await read_actions(state.client, Keyspace(prefix))
    jobs = [job for job in state.runner.jobs if job.prefix == prefix]
    return templates.TemplateResponse(request, "audit.html", {"records": records, "jobs": jobs})


ROUTES: Final = [Route("/audit", audit)]
