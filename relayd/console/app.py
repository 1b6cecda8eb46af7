"""The console's Starlette application: one page per view, rendered on the server with Jinja2.

Every GET only reads. The two state changes (``POST /replay``, ``POST /purge``) exist only with
``--allow-actions`` and go through ``ConsoleGuard`` (origin, token, CSRF) first; their dry-run
previews are GETs that count. The overview streams from the one shared ``OverviewPoller``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import parse_qs

import orjson
from jinja2 import Environment, PackageLoader, select_autoescape
from redis.exceptions import RedisError
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from relayd.console.actions import ActionRunner, count_matching
from relayd.console.commands import purge_command, replay_command
from relayd.console.filters import DeadLetterFilter, FilterInvalid
from relayd.console.paging import PageTokenInvalid
from relayd.console.poller import OverviewPoller
from relayd.console.reads import read_dead_letter, read_dead_letter_page, read_timers, sample_groups
from relayd.console.redis_failure import RETRY_AFTER_S, redis_failure
from relayd.console.security import CSRF_FIELD, SECURITY_HEADERS, SESSION_COOKIE, Access, same_origin
from relayd.console.signatures import error_signature
from relayd.engine.redis_time import parse_time_reply
from relayd.envelope import KINDS
from relayd.state import RedisClient
from relayd.state.audit import read_actions
from relayd.state.deadletters import REASON_CODES
from store import Keyspace

#: Dead letters per page (one HSCAN step of this COUNT per kind visited).
PAGE_SIZE: Final = 50
#: Timers listed per page.
TIMER_PAGE: Final = 100
#: Most ids one "replay selected" form may carry.
MAX_SELECTED: Final = 1000

_PUBLIC_PREFIXES: Final = ("/static/", "/login")
#: The pages that change dead letters (and their dry-run previews): refused on a read-only console.
_ACTION_PATHS: Final = ("/replay", "/purge")
_READ_ONLY: Final = "read-only console: start it with --allow-actions"


@dataclass(frozen=True, slots=True)
class ConsoleState:
    """What every handler reads: the configured prefixes and the shared services."""

    prefixes: tuple[str, ...]
    client: RedisClient
    access: Access
    poller: OverviewPoller
    runner: ActionRunner
    redis_display: str


def _when(epoch_s: object) -> str:
    if not isinstance(epoch_s, int | float):
        return "-"
    return datetime.fromtimestamp(epoch_s, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _seconds(value: object) -> str:
    if not isinstance(value, int | float):
        return "-"
    return f"{value:.1f} s" if value < 120 else f"{value / 60:.1f} min"


def _pretty(value: object) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode()


def _stored_value(document: dict[str, object]) -> str:
    """The entry as it lived in Redis: pretty JSON when it parses, else the text as stored.

    The engine keeps an outbox event as a JSON string inside the JSON value (``"e"``); it is
    shown parsed, so the event reads as a document rather than an escaped line.
    """
    if "value" in document:
        text = str(document["value"])
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return text
        if isinstance(value, dict) and isinstance(value.get("e"), str):
            with contextlib.suppress(orjson.JSONDecodeError):
                value = {**value, "e": orjson.loads(value["e"])}
        return _pretty(value)
    for name in ("member", "value_b64", "member_b64"):
        if name in document:
            return str(document[name]).replace("\x00", "\\x00")
    return "-"


_templates = Environment(loader=PackageLoader("relayd.console"), autoescape=select_autoescape(default=True))
_templates.filters.update(when=_when, seconds=_seconds, pretty=_pretty, signature=error_signature)


def _state(request: Request) -> ConsoleState:
    state: ConsoleState = request.app.state.console
    return state


def _prefix(request: Request) -> str:
    state = _state(request)
    asked = request.query_params.get("prefix")
    return asked if asked in state.prefixes else state.prefixes[0]


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    state = _state(request)
    session = request.cookies.get(SESSION_COOKIE)
    html = _templates.get_template(template).render(
        request=request,
        prefixes=state.prefixes,
        prefix=_prefix(request),
        allow_actions=state.access.allow_actions,
        login_required=state.access.login_required,
        signed_in=state.access.session_ok(session),
        csrf=state.access.csrf_for(session) or "",
        csrf_field=CSRF_FIELD,
        kinds=KINDS,
        reason_codes=sorted(REASON_CODES),
        redis_display=state.redis_display,
        **context,
    )
    return HTMLResponse(html, status_code=status_code)


def _filter(request: Request, values: Any = None) -> DeadLetterFilter:
    return DeadLetterFilter.from_query(values if values is not None else request.query_params)


async def overview(request: Request) -> Response:
    snapshot = await _state(request).poller.current()
    return render(request, "overview.html", snapshot=snapshot)


async def events(request: Request) -> Response:
    poller = _state(request).poller
    template = _templates.get_template("_overview.html")

    async def stream() -> AsyncIterator[ServerSentEvent]:
        # aclosing: a page that goes away unsubscribes at once, not when its generator is collected.
        async with contextlib.aclosing(poller.subscribe()) as snapshots:
            async for snapshot in snapshots:
                if await request.is_disconnected():
                    return
                yield ServerSentEvent(
                    data=template.render(snapshot=snapshot).replace("\n", " "), event="overview"
                )

    return EventSourceResponse(stream(), ping=15)


async def dead_letters(request: Request) -> Response:
    prefix = _prefix(request)
    wanted = _filter(request)
    started = time.perf_counter()
    page = await read_dead_letter_page(
        _state(request).client,
        Keyspace(prefix),
        wanted,
        request.query_params.get("page"),
        page_size=PAGE_SIZE,
    )
    elapsed_ms = (time.perf_counter() - started) * 1000
    template = "_dead_letter_rows.html" if request.headers.get("hx-request") else "dead_letters.html"
    return render(request, template, wanted=wanted, page=page, elapsed_ms=elapsed_ms)


async def dead_letter(request: Request) -> Response:
    prefix = _prefix(request)
    kind = request.query_params.get("kind")
    letter = await read_dead_letter(
        _state(request).client,
        Keyspace(prefix),
        request.query_params.get("id", ""),
        kind if kind in KINDS else None,
    )
    if letter is None:
        return render(request, "error.html", 404, message="no such dead letter (replayed or purged?)")
    return render(request, "dead_letter.html", letter=letter, stored_value=_stored_value(letter.document))


async def groups(request: Request) -> Response:
    wanted = _filter(request)
    sample = await sample_groups(_state(request).client, Keyspace(_prefix(request)), wanted)
    return render(request, "groups.html", sample=sample, wanted=wanted)


async def timers(request: Request) -> Response:
    execution = (request.query_params.get("execution") or "").strip() or None
    cursor_text = request.query_params.get("cursor", "0")
    client = _state(request).client
    # Due or not by the Redis server's clock, as the relay decides it, not this host's.
    now = parse_time_reply(await client.time())
    view = await read_timers(
        client,
        Keyspace(_prefix(request)),
        now=now,
        limit=TIMER_PAGE,
        execution=execution,
        cursor=int(cursor_text) if cursor_text.isdigit() else 0,
    )
    return render(request, "timers.html", view=view, execution=execution or "", now=now)


async def audit(request: Request) -> Response:
    state = _state(request)
    prefix = _prefix(request)
    records = await read_actions(state.client, Keyspace(prefix))
    jobs = [job for job in state.runner.jobs if job.prefix == prefix]
    return render(request, "audit.html", records=records, jobs=jobs)


def _selected_ids(values: Any) -> list[str]:
    ids = [i for i in values.getlist("ids") if i][:MAX_SELECTED]
    return list(dict.fromkeys(ids))


async def replay_preview(request: Request) -> Response:
    state = _state(request)
    prefix = _prefix(request)
    wanted = _filter(request)
    ids = _selected_ids(request.query_params)
    count = await count_matching(state.client, Keyspace(prefix), wanted, ids)
    return render(
        request,
        "confirm_replay.html",
        wanted=wanted,
        ids=ids,
        count=count,
        rate=state.runner.rate_per_s,
        command=replay_command(prefix, wanted, ids),
    )


async def replay(request: Request) -> Response:
    state = _state(request)
    form = await request.form()
    prefix = str(form.get("prefix", ""))
    if prefix not in state.prefixes:
        return render(request, "error.html", 400, message="unknown prefix")
    wanted = _filter(request, {k: str(v) for k, v in form.items()})
    ids = _selected_ids(form)
    planned_text = str(form.get("planned", "0"))
    planned = int(planned_text) if planned_text.isdigit() else 0
    client = request.client.host if request.client else ""
    state.runner.start_replay(prefix, wanted, ids, planned=planned, source=client)
    return RedirectResponse(f"/audit?prefix={prefix}", status_code=303)


async def purge_preview(request: Request) -> Response:
    state = _state(request)
    prefix = _prefix(request)
    kind = request.query_params.get("kind") or None
    wanted = DeadLetterFilter.from_query({"kind": kind or ""})
    count = await count_matching(state.client, Keyspace(prefix), wanted)
    return render(
        request, "confirm_purge.html", wanted=wanted, count=count, command=purge_command(prefix, wanted)
    )


async def purge(request: Request) -> Response:
    state = _state(request)
    form = await request.form()
    prefix = str(form.get("prefix", ""))
    if prefix not in state.prefixes:
        return render(request, "error.html", 400, message="unknown prefix")
    if str(form.get("confirm", "")).strip() != prefix:
        return render(request, "error.html", 400, message=f"type the prefix {prefix!r} to confirm the purge")
    wanted = DeadLetterFilter.from_query({"kind": str(form.get("kind", ""))})
    client = request.client.host if request.client else ""
    await state.runner.purge(prefix, wanted, source=client)
    return RedirectResponse(f"/audit?prefix={prefix}", status_code=303)


async def login_page(request: Request) -> Response:
    return render(request, "login.html")


async def login(request: Request) -> Response:
    access = _state(request).access
    form = await request.form()
    if not access.token_matches(str(form.get("token", ""))):
        return render(request, "login.html", 401, failed=True)
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        access.open_session(),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


async def logout(request: Request) -> Response:
    _state(request).access.close_session(request.cookies.get(SESSION_COOKIE))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, httponly=True, samesite="strict", path="/")
    return response


class ConsoleGuard:
    """Pure ASGI middleware: security headers on every answer; origin, token and CSRF checks first."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
            await send(message)

        request = Request(scope, receive)
        body = b"" if request.method in ("GET", "HEAD") else await request.body()
        refusal = await self._refusal(request, body)
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        replayed = False

        async def receive_body() -> Message:
            # The guard read the body to check the CSRF field; hand it on to the route once.
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, receive_body, send_with_headers)

    async def _refusal(self, request: Request, body: bytes) -> Response | None:  # noqa: PLR0911  # a return per rule
        state = _state(request)
        access = state.access
        path = request.url.path
        changes_state = request.method not in ("GET", "HEAD")
        browser = "origin" in request.headers or "sec-fetch-site" in request.headers
        if changes_state:
            own_origin = f"{request.url.scheme}://{request.headers.get('host', '')}"
            if not same_origin(request.headers, own_origin):
                return render(request, "error.html", 403, message="cross-site request refused")
            if path == "/login":
                return None
        if path in _ACTION_PATHS and not access.allow_actions:
            return render(request, "error.html", 403, message=_READ_ONLY)
        if any(path.startswith(p) for p in _PUBLIC_PREFIXES) or not access.login_required:
            return None
        session = request.cookies.get(SESSION_COOKIE)
        if access.bearer_ok(request.headers.get("authorization")):
            return None
        if not access.session_ok(session):
            return render(request, "login.html", 401)
        if changes_state:
            if not browser:
                # A session cookie without the headers every browser sends: not our page.
                return render(request, "error.html", 403, message="cross-site request refused")
            offered = parse_qs(body.decode("utf-8", "replace")).get(CSRF_FIELD, [""])[0]
            if not access.csrf_ok(session, offered):
                return render(
                    request, "error.html", 403, message="stale or missing form token; reload the page"
                )
        return None


def _handle_bad_input(
    handler: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    async def guarded(request: Request) -> Response:
        try:
            return await handler(request)
        except (FilterInvalid, PageTokenInvalid) as exc:
            return render(request, "error.html", 400, message=str(exc))

    return guarded


async def _redis_failed(request: Request, exc: Exception) -> Response:
    """Redis failed a page's read: 503 with the reason; the page asks again by itself."""
    response = render(request, "error.html", 503, message=redis_failure(exc), retry_after_s=RETRY_AFTER_S)
    response.headers["Retry-After"] = str(RETRY_AFTER_S)
    return response


def build_app(state: ConsoleState, *, static_dir: str, allowed_hosts: Sequence[str] = ("*",)) -> Starlette:
    routes = [
        Route("/", _handle_bad_input(overview)),
        Route("/events", events),
        Route("/dead-letters", _handle_bad_input(dead_letters)),
        Route("/dead-letter", _handle_bad_input(dead_letter)),
        Route("/groups", _handle_bad_input(groups)),
        Route("/timers", _handle_bad_input(timers)),
        Route("/audit", _handle_bad_input(audit)),
        Route("/replay", _handle_bad_input(replay_preview), methods=["GET"]),
        Route("/replay", _handle_bad_input(replay), methods=["POST"]),
        Route("/purge", _handle_bad_input(purge_preview), methods=["GET"]),
        Route("/purge", _handle_bad_input(purge), methods=["POST"]),
        Route("/login", login_page, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Mount("/static", StaticFiles(directory=static_dir), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={RedisError: _redis_failed})
    app.state.console = state
    app.add_middleware(ConsoleGuard)
    # Added last, so it runs first: a page on another site whose name was re-pointed at 127.0.0.1
    # (DNS rebinding) sends its own Host, and is answered 400 before anything is read.
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    return app
