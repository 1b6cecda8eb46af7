"""``ConsoleGuard``: the access rules of ``security`` applied to every request, before any view.

Pure ASGI middleware: it reads a form's body once to check the CSRF field and hands the same
bytes on to the route. It runs inside ``TrustedHostMiddleware`` and outside the app's exception
handlers, so it answers its refusals itself (the error page, or the login page for 401).
"""

from __future__ import annotations

from typing import Final
from urllib.parse import parse_qs

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from relayd.console.rendering import error_page, templates
from relayd.console.security import CSRF_FIELD, SECURITY_HEADERS, SESSION_COOKIE, same_origin
from relayd.console.state import console_state

_PUBLIC_PREFIXES: Final = ("/static/", "/login", "/favicon.ico")
#: The pages that change dead letters (and their dry-run previews) or pause and resume
#: deliveries: refused on a read-only console.
_ACTION_PATHS: Final = ("/replay", "/purge", "/pause", "/resume")
_READ_ONLY: Final = "read-only console: start it with --allow-actions"
_CROSS_SITE: Final = "cross-site request refused"


class ConsoleGuard:
    """Security headers on every answer; origin, token and CSRF checks before the route runs."""

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
        refusal = _refusal(request, body)
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


def _refusal(request: Request, body: bytes) -> Response | None:  # noqa: PLR0911  # a return per rule
    """The answer refusing ``request``, or None when it may go on to its route."""
    access = console_state(request).access
    path = request.url.path
    changes_state = request.method not in ("GET", "HEAD")
    browser = "origin" in request.headers or "sec-fetch-site" in request.headers
    if changes_state:
        own_origin = f"{request.url.scheme}://{request.headers.get('host', '')}"
        if not same_origin(request.headers, own_origin):
            return error_page(request, 403, _CROSS_SITE)
        if path == "/login":
            return None
    if path in _ACTION_PATHS and not access.allow_actions:
        return error_page(request, 403, _READ_ONLY)
    if any(path.startswith(p) for p in _PUBLIC_PREFIXES) or not access.login_required:
        return None
    session = request.cookies.get(SESSION_COOKIE)
    if access.bearer_ok(request.headers.get("authorization")):
        return None
    if not access.session_ok(session):
        return templates.TemplateResponse(request, "login.html", status_code=401)
    if changes_state:
        if not browser:
            # A session cookie without the headers every browser sends: not our page.
            return error_page(request, 403, _CROSS_SITE)
        offered = parse_qs(body.decode("utf-8", "replace")).get(CSRF_FIELD, [""])[0]
        if not access.csrf_ok(session, offered):
            return error_page(request, 403, "stale or missing form token; reload the page")
    return None
