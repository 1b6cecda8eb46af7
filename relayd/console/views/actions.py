"""Replay and purge (``/replay``, ``/purge``): a GET previews (a dry-run count), a POST acts.

Both exist only on a console started with ``--allow-actions`` (``guard`` refuses them
otherwise, previews included); a POST reaches here only from the console's own page, signed in,
or from a client holding the bearer token. The work itself is ``actions.ActionRunner``'s, which
records it in the audit trail.
"""

from __future__ import annotations

from typing import Final

from starlette.datastructures import FormData, ImmutableMultiDict
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from relayd.console.actions import count_matching
from relayd.console.commands import purge_command, replay_command
from relayd.console.filters import DeadLetterFilter
from relayd.console.rendering import templates
from relayd.console.state import chosen_prefix, console_state
from store import Keyspace

#: Most ids one "replay selected" form may carry.
MAX_SELECTED: Final = 1000


def _selected_ids(values: ImmutableMultiDict[str, object]) -> list[str]:
    """The ``ids`` a query or form selects, each once, in order, at most ``MAX_SELECTED``."""
    ids = [str(i) for i in values.getlist("ids") if i][:MAX_SELECTED]
    return list(dict.fromkeys(ids))


def _served_prefix(request: Request, form: FormData) -> str:
    """The form's prefix; 400 when this console does not serve it."""
    prefix = str(form.get("prefix", ""))
    if prefix not in console_state(request).prefixes:
        raise HTTPException(400, "unknown prefix")
    return prefix


def _source(request: Request) -> str:
    """The client's address, for the audit record."""
    return request.client.host if request.client else ""


async def replay_preview(request: Request) -> Response:
    state = console_state(request)
    prefix = chosen_prefix(request)
    wanted = DeadLetterFilter.from_query(request.query_params)
    ids = _selected_ids(request.query_params)
    count = await count_matching(state.client, Keyspace(prefix), wanted, ids)
    context = {
        "wanted": wanted,
        "ids": ids,
        "count": count,
        "rate": state.runner.rate_per_s,
        "command": replay_command(prefix, wanted, ids),
    }
    return templates.TemplateResponse(request, "confirm_replay.html", context)


async def replay(request: Request) -> Response:
    form = await request.form()
    prefix = _served_prefix(request, form)
    wanted = DeadLetterFilter.from_query({k: str(v) for k, v in form.items()})
    planned_text = str(form.get("planned", "0"))
    planned = int(planned_text) if planned_text.isdigit() else 0
    console_state(request).runner.start_replay(
        prefix, wanted, _selected_ids(form), planned=planned, source=_source(request)
    )
    return RedirectResponse(f"/audit?prefix={prefix}", status_code=303)


async def purge_preview(request: Request) -> Response:
    state = console_state(request)
    prefix = chosen_prefix(request)
    wanted = DeadLetterFilter.from_query({"kind": request.query_params.get("kind") or ""})
    count = await count_matching(state.client, Keyspace(prefix), wanted)
    context = {"wanted": wanted, "count": count, "command": purge_command(prefix, wanted)}
    return templates.TemplateResponse(request, "confirm_purge.html", context)


async def purge(request: Request) -> Response:
    form = await request.form()
    prefix = _served_prefix(request, form)
    if str(form.get("confirm", "")).strip() != prefix:
        raise HTTPException(400, f"type the prefix {prefix!r} to confirm the purge")
    wanted = DeadLetterFilter.from_query({"kind": str(form.get("kind", ""))})
    await console_state(request).runner.purge(prefix, wanted, source=_source(request))
    return RedirectResponse(f"/audit?prefix={prefix}", status_code=303)


ROUTES: Final = [
    Route("/replay", replay_preview, methods=["GET"]),
    Route("/replay", replay, methods=["POST"]),
    Route("/purge", purge_preview, methods=["GET"]),
    Route("/purge", purge, methods=["POST"]),
]
