"""The console's Starlette application: the pages of ``views``, the guard, the error handlers.

Every GET only reads. The two state changes (``POST /replay``, ``POST /purge``) exist only with
``--allow-actions`` and go through ``ConsoleGuard`` (origin, token, CSRF) first; their dry-run
previews are GETs that count. The overview streams from the one shared ``OverviewPoller``.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from relayd.console.error_pages import EXCEPTION_HANDLERS
from relayd.console.guard import ConsoleGuard
from relayd.console.state import ConsoleState
from relayd.console.views import (
    actions,
    audit,
    dead_letters,
    groups,
    login,
    overview,
    pauses,
    retrying,
    timers,
)


async def _no_icon(request: Request) -> Response:
    return Response(status_code=204)


def build_app(state: ConsoleState, *, static_dir: str, allowed_hosts: Sequence[str] = ("*",)) -> Starlette:
    """The console's app for ``state``; ``static_dir`` holds htmx, ``console.js`` and the stylesheet."""
    routes: list[BaseRoute] = [
        *overview.ROUTES,
        *dead_letters.ROUTES,
        *groups.ROUTES,
        *timers.ROUTES,
        *retrying.ROUTES,
        *audit.ROUTES,
        *actions.ROUTES,
        *pauses.ROUTES,
        *login.ROUTES,
        # Browsers ask for it on every page: no icon, and no sign-in page in the console's log.
        Route("/favicon.ico", _no_icon),
        Mount("/static", StaticFiles(directory=static_dir), name="static"),
    ]
    middleware = [
        # First, so outermost: a page on another site whose name was re-pointed at 127.0.0.1
        # (DNS rebinding) sends its own Host, and is answered 400 before anything is read.
        Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)),
        Middleware(ConsoleGuard),
    ]
    app = Starlette(routes=routes, middleware=middleware, exception_handlers=EXCEPTION_HANDLERS)
    app.state.console = state
    return app
