"""relayd's exceptions, each carrying the process exit code it maps to (README.md#commands).

    RelaydError(exit_code=1)
    ├── ConfigError (2)            bad flag, env var, URL, file or sink spec
    │   ├── UnknownSink (2)        no sink registered under that scheme
    │   └── ListenerUnavailable (2) a listener (metrics, console) cannot bind its address
    ├── RedisUnreachable (3)       Redis refused, timed out or rejected the credentials
    └── SinkError (1)              a sink failed to start or close

Only ``cli/app.py`` turns these into exit codes, and ``engine/loop.py`` into log lines.
"""

from __future__ import annotations

from collections.abc import Sequence


class RelaydError(Exception):
    """Base of relayd's own errors; ``exit_code`` is what the CLI exits with."""

    exit_code = 1


class ConfigError(RelaydError):
    """The configuration cannot work; the message is one line an operator can act on."""

    exit_code = 2


class UnknownSink(ConfigError):
    """No sink is registered under this scheme (entry points and built-ins searched)."""

    def __init__(self, scheme: str, known: Sequence[str]) -> None:
        super().__init__(f"unknown sink {scheme!r}; known: {', '.join(sorted(known))}")
        self.scheme, self.known = scheme, tuple(known)


class ListenerUnavailable(ConfigError):
    """A listener cannot bind its address (in use, not local, not permitted)."""

    def __init__(self, what: str, host: str, port: int, error: OSError) -> None:
        shown_host = f"[{host}]" if ":" in host else host
        why = error.strerror or type(error).__name__
        super().__init__(f"cannot listen on {shown_host}:{port} for the {what}: {why.lower()}")
        self.host, self.port = host, port


class RedisUnreachable(RelaydError):
    """Redis could not be reached or refused the credentials."""

    exit_code = 3


class SinkError(RelaydError):
    """A sink could not start or close."""
