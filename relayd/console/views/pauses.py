"""The pauses page (``/pauses``): what is paused in a prefix, and, with ``--allow-actions``, the
forms that pause (``POST /pause``) and resume (``POST /resume``), each audited.

The state is the same ``P:relay:pauses`` that ``relayd pause`` writes (``relayd.state.pauses``):
every replica obeys it within half a second. The source of a console action is its client's
address, recorded as the pause's ``by`` and in the audit trail.
"""

from __future__ import annotations

from typing import Final

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from relayd.console.rendering import templates
from relayd.console.state import chosen_prefix, console_state
from relayd.envelope import KINDS
from relayd.state.pauses import MAX_REASON, Pause, pause, read_pauses, resume
from store import Keyspace


def _served_prefix(request: Request, form: FormData) -> str:
    prefix = str(form.get("prefix", ""))
    if prefix not in console_state(request).prefixes:
        raise HTTPException(400, "unknown prefix")
    return prefix


def _scope(form: FormData) -> Pause:
    """The selectors of a form (blank: any); 400 for a kind that is none."""
    values = {name: (str(form.get(name, "")).strip() or None) for name in ("kind", "sink", "target")}
    if values["kind"] is not None and values["kind"] not in KINDS:
        raise HTTPException(400, f"kind must be one of {', '.join(KINDS)}")
    return Pause(kind=values["kind"], sink=values["sink"], target=values["target"])


def _command(verb: str, prefix: str, scope: Pause, reason: str = "") -> str:
    import shlex

    words = ["relayd", verb, "--prefix", prefix]
    for name, value in scope.selectors().items():
        words += [f"--{name}", value]
    return shlex.join([*words, "--reason", reason] if verb == "pause" else words)


def _source(request: Request) -> str:
    return f"console:{request.client.host}" if request.client else "console"


async def pauses_page(request: Request) -> Response:
    state = console_state(request)
    prefix = chosen_prefix(request)
    current = await read_pauses(state.client, Keyspace(prefix))
    context = {"pauses": current, "kinds": KINDS, "max_reason": MAX_REASON}
    return templates.TemplateResponse(request, "pauses.html", context)


async def pause_action(request: Request) -> Response:
    form = await request.form()
    prefix = _served_prefix(request, form)
    scope = _scope(form)
    reason = str(form.get("reason", "")).strip()
    if not reason or len(reason) > MAX_REASON:
        raise HTTPException(400, f"a reason is required (at most {MAX_REASON} characters)")
    source = _source(request)
    wanted = Pause(scope.kind, scope.sink, scope.target, 0.0, source, reason)
    await pause(
        console_state(request).client,
        Keyspace(prefix),
        wanted,
        command=_command("pause", prefix, scope, reason),
        source=source,
    )
    return RedirectResponse(f"/pauses?prefix={prefix}", status_code=303)


async def resume_action(request: Request) -> Response:
    form = await request.form()
    prefix = _served_prefix(request, form)
    scope = _scope(form)
    await resume(
        console_state(request).client,
        Keyspace(prefix),
        scope,
        command=_command("resume", prefix, scope),
        source=_source(request),
    )
    return RedirectResponse(f"/pauses?prefix={prefix}", status_code=303)


ROUTES: Final = [
    Route("/pauses", pauses_page, methods=["GET"]),
    Route("/pause", pause_action, methods=["POST"]),
    Route("/resume", resume_action, methods=["POST"]),
]
