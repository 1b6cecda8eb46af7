"""The groups page (``/groups``): dead letters by kind, reason code and error signature."""

from __future__ import annotations

from typing import Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from relayd.console.filters import DeadLetterFilter
from relayd.console.reads import sample_groups
from relayd.console.rendering import templates
from relayd.console.state import chosen_prefix, console_state
from store import Keyspace


async def groups(request: Request) -> Response:
    wanted = DeadLetterFilter.from_query(request.query_params)
    sample = await sample_groups(console_state(request).client, Keyspace(chosen_prefix(request)), wanted)
    return templates.TemplateResponse(request, "groups.html", {"sample": sample, "wanted": wanted})


ROUTES: Final = [Route("/groups", groups)]
