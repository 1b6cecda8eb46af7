"""The dead-letter list (``/dead-letters``, a page at a time) and one dead letter (``/dead-letter``)."""

from __future__ import annotations

import time
from typing import Final

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from relayd.console.display import stored_value
from relayd.console.filters import DeadLetterFilter
from relayd.console.reads import read_dead_letter, read_dead_letter_page
from relayd.console.rendering import templates
from relayd.console.state import chosen_prefix, console_state
from relayd.envelope import KINDS
from store import Keyspace

#: Dead letters per page (one HSCAN step of this COUNT per kind visited).
PAGE_SIZE: Final = 50


async def dead_letters(request: Request) -> Response:
    """A page of the dead letters the query's filter matches; htmx's "next page" gets the rows only."""
    wanted = DeadLetterFilter.from_query(request.query_params)
    started = time.perf_counter()
    page = await read_dead_letter_page(
        console_state(request).client,
        Keyspace(chosen_prefix(request)),
        wanted,
        request.query_params.get("page"),
        page_size=PAGE_SIZE,
    )
    elapsed_ms = (time.perf_counter() - started) * 1000
    template = "_dead_letter_rows.html" if request.headers.get("hx-request") else "dead_letters.html"
    return templates.TemplateResponse(
        request, template, {"wanted": wanted, "page": page, "elapsed_ms": elapsed_ms}
    )


async def dead_letter(request: Request) -> Response:
    kind = request.query_params.get("kind")
    letter = await read_dead_letter(
        console_state(request).client,
        Keyspace(chosen_prefix(request)),
        request.query_params.get("id", ""),
        kind if kind in KINDS else None,
    )
    if letter is None:
        raise HTTPException(404, "no such dead letter (replayed or purged?)")
    return templates.TemplateResponse(
        request, "dead_letter.html", {"letter": letter, "stored_value": stored_value(letter.document)}
    )


ROUTES: Final = [Route("/dead-letters", dead_letters), Route("/dead-letter", dead_letter)]
