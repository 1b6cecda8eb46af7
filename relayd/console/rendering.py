"""The console's templates: Starlette's ``Jinja2Templates`` over ``templates/``, autoescaped.

What the page frame (``base.html``) shows on every page comes from one context processor,
``page_context``: the prefixes and the one shown, the mode, the Redis address (credentials
already masked), whether a session is signed in and its form token. Fixed values (the kinds,
the reason codes, the form token's field name) are template globals; the ``display`` functions
are filters. A view passes only what its own page adds.
"""

from __future__ import annotations

from typing import Any, Final

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from relayd.console import display
from relayd.console.poller import trouble, unhealthy_first
from relayd.console.security import CSRF_FIELD, SESSION_COOKIE
from relayd.console.signatures import error_signature
from relayd.console.state import chosen_prefix, console_state
from relayd.envelope import KINDS
from relayd.state.deadletters import REASON_CODES


def page_context(request: Request) -> dict[str, Any]:
    """What the frame of every page shows, for the console and the session behind ``request``."""
    state = console_state(request)
    session = request.cookies.get(SESSION_COOKIE)
    return {
        "prefixes": state.prefixes,
        "prefix": chosen_prefix(request),
        "allow_actions": state.access.allow_actions,
        "redis_display": state.redis_display,
        "signed_in": state.access.session_ok(session),
        "csrf": state.access.csrf_for(session) or "",
    }


def _environment() -> Environment:
    # PackageLoader reads templates/ from the installed package (the wheel ships it).
    environment = Environment(
        loader=PackageLoader("relayd.console"), autoescape=select_autoescape(default=True)
    )
    environment.filters.update(
        when=display.when,
        seconds=display.seconds,
        pretty=display.pretty,
        signature=error_signature,
        trouble=trouble,
        unhealthy_first=unhealthy_first,
    )
    environment.globals.update(csrf_field=CSRF_FIELD, kinds=KINDS, reason_codes=sorted(REASON_CODES))
    return environment


templates: Final = Jinja2Templates(env=_environment(), context_processors=[page_context])


def error_page(
    request: Request, status_code: int, message: str, *, retry_after_s: int | None = None
) -> Response:
    """The console's error page: ``message`` under the usual frame; with ``retry_after_s`` the page
    asks again by itself after that many seconds (a refresh, and ``Retry-After``)."""
    headers = {"Retry-After": str(retry_after_s)} if retry_after_s is not None else None
    return templates.TemplateResponse(
        request,
        "error.html",
        {"message": message, "retry_after_s": retry_after_s},
        status_code=status_code,
        headers=headers,
    )
