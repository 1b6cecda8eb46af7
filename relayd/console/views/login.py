"""Signing in (``/login``) and out (``/logout``): a session cookie in exchange for the token.

The cookie holds a random session id, never the token (``security.Access``); it is
``HttpOnly; SameSite=Strict``, and ``Secure`` when the console is reached over https.
"""

from __future__ import annotations

from typing import Final

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from relayd.console.rendering import templates
from relayd.console.security import SESSION_COOKIE
from relayd.console.state import console_state


async def login_page(request: Request) -> Response:
    return templates.TemplateResponse(request, "login.html")


async def login(request: Request) -> Response:
    access = console_state(request).access
    form = await request.form()
    if not access.token_matches(str(form.get("token", ""))):
        return templates.TemplateResponse(request, "login.html", {"failed": True}, status_code=401)
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
    console_state(request).access.close_session(request.cookies.get(SESSION_COOKIE))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, httponly=True, samesite="strict", path="/")
    return response


ROUTES: Final = [
    Route("/login", login_page, methods=["GET"]),
    Route("/login", login, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
]
