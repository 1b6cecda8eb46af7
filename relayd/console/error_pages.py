"""The console's exception handlers: every failure a page can meet answers the error page.

Registered on the Starlette app (``app.build_app``), so the views raise and never catch:

- ``HTTPException``: a view's refusal (an unknown prefix, a dead letter that is gone) and
  Starlette's own (no such page, wrong method), with its status and detail.
- ``FilterInvalid``, ``PageTokenInvalid``: a query the console cannot use, 400 and why.
- ``RedisError``: Redis failed the page's read, 503 with the reason (``redis_failure``); the page
  asks again every ``RETRY_AFTER_S`` seconds, so it recovers by itself once Redis answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from redis.exceptions import RedisError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ExceptionHandler

from relayd.console.filters import FilterInvalid
from relayd.console.paging import PageTokenInvalid
from relayd.console.redis_failure import RETRY_AFTER_S, redis_failure
from relayd.console.rendering import error_page


async def refused(request: Request, exc: Exception) -> Response:
    """An ``HTTPException``: its status and headers (``Allow`` on a 405), its detail as the message."""
    assert isinstance(exc, HTTPException)
    response = error_page(request, exc.status_code, exc.detail)
    response.headers.update(exc.headers or {})
    return response


async def bad_input(request: Request, exc: Exception) -> Response:
    """A filter or page token the console cannot use: 400, and what is wrong with it."""
    return error_page(request, 400, str(exc))


async def redis_failed(request: Request, exc: Exception) -> Response:
    """Redis failed a page's read: 503 with the reason; the page asks again by itself."""
    return error_page(request, 503, redis_failure(exc), retry_after_s=RETRY_AFTER_S)


EXCEPTION_HANDLERS: Final[Mapping[Any, ExceptionHandler]] = {
    HTTPException: refused,
    FilterInvalid: bad_input,
    PageTokenInvalid: bad_input,
    RedisError: redis_failed,
}
