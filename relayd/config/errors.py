"""A pydantic validation error as the one line relayd prints for a bad option (exit code 2)."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import ValidationError
from pydantic_core import ErrorDetails


def describe_validation_error(exc: ValidationError, *, shown: Callable[[str], str] | None = None) -> str:
    """The first problem as one line naming the option (``--batch`` / ``RELAYD_BATCH``) when it is one.

    ``shown`` names an option other than by its flag (a plugin's ``--sink-option NAME.KEY``).
    """
    error = exc.errors(include_url=False)[0]
    message = _message(error)
    if not error["loc"]:
        return message  # a rule across options (_check_and_read): its message names them
    name = str(error["loc"][0])
    flag = shown(name) if shown is not None else f"--{name.replace('_', '-')}"
    return f"invalid {flag} (RELAYD_{name.upper()}): {message}"


def _message(error: ErrorDetails) -> str:
    """A validator's own words (without pydantic's "Value error, "), else pydantic's, on one line."""
    cause = error.get("ctx", {}).get("error")
    text = str(cause) if isinstance(cause, ValueError) else error["msg"]
    return " ".join(text.split())
