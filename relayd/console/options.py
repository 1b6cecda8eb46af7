"""The console's options, declared here (``relayd.options``) and read by ``server``.

The console listens on its own address, loopback by default; the loopback-or-token rule is
checked by the console itself (``security``), so other commands never trip on it. Light on
purpose: the CLI imports it for its flags, none of the console's extra.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from relayd.options import CONSOLE, STRIPPED_WATCHED, option


@dataclass(frozen=True, slots=True)
class ConsoleServeOptions:
    """Where the console listens, who may use it, and what it may do."""

    console_addr: str = option(
        "127.0.0.1:9465",
        "HOST:PORT the console listens on (loopback by default; any other host needs a token file).",
        panel=CONSOLE,
    )
    console_token_file: Path | None = option(
        None,
        f"File holding the console's access token (compared in constant time; {STRIPPED_WATCHED}).",
        panel=CONSOLE,
    )
    allow_actions: bool = option(
        False, "Let the console replay and purge dead letters (read-only otherwise).", panel=CONSOLE
    )
    # Most dead letters the console replays per second, so a replay never floods a sink.
    console_replay_rate: float = option(
        100.0,
        "Most dead letters the console replays per second.",
        panel=CONSOLE,
        constraints={"gt": 0, "le": 100_000},
    )
