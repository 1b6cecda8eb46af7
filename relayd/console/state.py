"""What every console handler reads: the served prefixes and the shared services, on ``app.state``.

One ``ConsoleState`` per running console, built by ``server`` and handed to ``app.build_app``;
views, the guard, the error pages and the page context all reach it through the request.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from relayd.console.actions import ActionRunner
from relayd.console.poller import OverviewPoller
from relayd.console.security import Access
from relayd.state import RedisClient


@dataclass(frozen=True, slots=True)
class ConsoleState:
    """The configured prefixes (the first is the default page's) and the shared services."""

    prefixes: tuple[str, ...]
    client: RedisClient
    access: Access
    poller: OverviewPoller
    runner: ActionRunner
    redis_display: str


def console_state(request: Request) -> ConsoleState:
    """The state of the console that received ``request``."""
    state: ConsoleState = request.app.state.console
    return state


def chosen_prefix(request: Request) -> str:
    """The prefix a page shows: the one asked for in the query when served, else the first."""
    state = console_state(request)
    asked = request.query_params.get("prefix")
    return asked if asked in state.prefixes else state.prefixes[0]
