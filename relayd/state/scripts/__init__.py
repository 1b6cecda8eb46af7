"""relayd's Lua scripts, loaded once from the package (each file opens with its KEYS/ARGV)."""

from __future__ import annotations

from importlib.resources import files
from typing import Final


def _load(name: str) -> str:
    return files(__package__).joinpath(f"{name}.lua").read_text(encoding="utf-8")


DEAD_LETTER: Final = _load("dead_letter")
REPLAY: Final = _load("replay")
LEASE_RENEW: Final = _load("lease_renew")
LEASE_RELEASE: Final = _load("lease_release")
PURGE: Final = _load("purge")
SAVE_ATTEMPTS: Final = _load("save_attempts")
RATE_TAKE: Final = _load("rate_take")
