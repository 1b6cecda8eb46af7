"""The console's access rules (docs/console.md#security): token, sessions, same-origin state changes, headers.

- A console has a token when ``--console-token-file`` names one, or when ``--allow-actions`` is
  given without one (then a random token is made for this run and printed once on the terminal).
  With a token, every page but the login page and static files needs a session cookie (made by
  posting the token to ``/login``) or ``Authorization: Bearer <token>``; otherwise 401.
- A non-loopback listen address without a token file is refused at start-up (``ConfigError``).
- A state-changing request (any method but GET/HEAD) must come from the console's own origin:
  ``Sec-Fetch-Site`` when the browser sends it must be ``same-origin``, ``Origin`` when sent must
  be the console's own; else 403. A browser session must also echo its CSRF value in the form.
- Every response carries a Content-Security-Policy, ``nosniff``, ``no-store``, no framing, and
  referrers only to itself. Cookies are ``HttpOnly; SameSite=Strict`` (and ``Secure`` behind https).

The token is compared with ``hmac.compare_digest`` and never rendered, logged or put in a URL.
A token file is watched (``relayd.security.material``): when it holds a new token, the old one stops
working and the sessions signed in with it are closed (``Access.rotate``).
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from relayd.config.redis_url import is_loopback
from relayd.errors import ConfigError
from relayd.security.material import WatchedFile, secret_file

SESSION_COOKIE: Final = "relayd_console_session"
CSRF_FIELD: Final = "csrf"

#: Sent with every response: scripts and styles only from the console itself, no inline code.
SECURITY_HEADERS: Final = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "cache-control": "no-store",
    # same-origin, not no-referrer: with no-referrer Chromium sends "Origin: null" on our own forms.
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
}


def check_listen_address(host: str, token_file: Path | None) -> None:
    """Refuse a non-loopback listen address without a token file (exit 2, one line)."""
    if token_file is None and not is_loopback(host):
        raise ConfigError(
            f"the console listens on non-loopback {host!r}: it needs --console-token-file "
            "(or listen on 127.0.0.1)"
        )


def watch_token(token_file: Path) -> WatchedFile[str]:
    """The watched token file; ``ConfigError`` naming the option when it is unreadable or empty."""
    try:
        return secret_file("--console-token-file", token_file)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def load_token(token_file: Path | None, *, allow_actions: bool) -> tuple[str | None, bool]:
    """The token (None: no login needed) and whether it was generated for this run."""
    if token_file is not None:
        return watch_token(token_file).value, False
    if allow_actions:
        return secrets.token_urlsafe(24), True
    return None, False


def same_origin(headers: Mapping[str, str], own_origin: str) -> bool:
    """Whether a state-changing request comes from the console's own pages (or a non-browser client).

    Browsers send ``Sec-Fetch-Site`` and ``Origin`` on every POST; a client that sends neither is
    not a browser page (curl, a script) and must then authenticate with the bearer token.
    """
    site = headers.get("sec-fetch-site")
    if site is not None and site != "same-origin":
        return False
    origin = headers.get("origin")
    return origin is None or origin == own_origin


@dataclass
class Access:
    """Who may look and who may act; sessions live in this process only."""

    token: str | None
    allow_actions: bool
    _sessions: dict[str, str] = field(default_factory=dict)

    @property
    def login_required(self) -> bool:
        return self.token is not None

    def token_matches(self, offered: str) -> bool:
        return self.token is not None and hmac.compare_digest(offered.encode(), self.token.encode())

    def bearer_ok(self, authorization: str | None) -> bool:
        scheme, _, value = (authorization or "").partition(" ")
        return scheme.lower() == "bearer" and self.token_matches(value.strip())

    def rotate(self, token: str) -> None:
        """Take a new token: the old one no longer signs in and its sessions are closed."""
        if token != self.token:
            self.token = token
            self._sessions.clear()

    def open_session(self) -> str:
        session = secrets.token_urlsafe(32)
        self._sessions[session] = secrets.token_urlsafe(24)
        return session

    def close_session(self, session: str | None) -> None:
        self._sessions.pop(session or "", None)

    def csrf_for(self, session: str | None) -> str | None:
        return self._sessions.get(session or "")

    def session_ok(self, session: str | None) -> bool:
        return session is not None and session in self._sessions

    def csrf_ok(self, session: str | None, offered: str | None) -> bool:
        expected = self.csrf_for(session)
        return expected is not None and offered is not None and hmac.compare_digest(expected, offered)
