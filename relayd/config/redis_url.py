"""relayd's Redis URL policy, in one place: parse, redact, the loopback test and the plaintext rule.

Pure (no I/O). Settings (relayd's own Redis), the sink specs (destination Redis of the
redis-stream and harel sinks), the log redaction and ``connect`` all use this module, so the
rules cannot drift apart (README.md#security, docs/internals.md#redis-topologies-and-test-servers):

- a URL is shown only through ``redact_url`` (its user information becomes ``***``);
- ``rediss://`` verifies the server; TLS options in a URL are refused (the CA comes from
  ``--redis-ca-file``), so no URL can turn verification off;
- plaintext to a host that is not loopback needs ``--allow-plaintext``, and is refused outright
  when credentials would cross it. For Sentinel every sentinel of the URL must pass.

The grammar itself (every topology) is ``store.urls``: the store parses the URLs it opens with
the same code.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qsl

from relayd.errors import ConfigError
from relayd.security.secret import Secret
from store.urls import SCHEMES, parse_url, redact_url

__all__ = [
    "REDIS_SCHEMES",
    "RedisAddress",
    "check_redis_url",
    "is_loopback",
    "parse_redis_url",
    "plaintext_refusal",
    "redact_url",
]

#: The URL schemes relayd accepts for a Redis (its own or a sink's destination).
REDIS_SCHEMES: Final = tuple(SCHEMES)


@dataclass(frozen=True, slots=True)
class RedisAddress:
    """A parsed, validated Redis URL. ``password`` never appears in ``repr`` or ``display``."""

    tls: bool
    cluster: bool
    host: str
    port: int
    db: int
    username: str | None
    password: Secret | None
    display: str  # the URL with any credentials replaced by ``***``, safe for logs and errors
    sentinel: bool = False
    #: every (host, port) of the URL: the server, the seed node, or the sentinels
    nodes: tuple[tuple[str, int], ...] = ()
    #: the master's name the sentinels know (Sentinel only)
    service: str | None = None


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_redis_url(url: str) -> RedisAddress:
    """Parse relayd's own Redis URL (any form of ``store.urls``; no query options).

    Raises:
        ValueError: with a message that never contains the password.
    """
    parsed = parse_url(url)
    if parsed.query:
        raise ValueError(f"Redis URL {parsed.display!r}: query options are not supported; use the flags")
    return RedisAddress(
        tls=parsed.tls,
        cluster=parsed.topology == "cluster",
        host=parsed.host,
        port=parsed.port,
        db=parsed.db,
        username=parsed.username,
        password=Secret(parsed.password) if parsed.password is not None else None,
        display=parsed.display,
        sentinel=parsed.topology == "sentinel",
        nodes=parsed.nodes,
        service=parsed.service,
    )


def plaintext_refusal(
    hosts: Iterable[str],
    *,
    tls: bool,
    credentials: bool,
    allow_plaintext: bool,
    service: str = "Redis",
    secure: str = "rediss://",
) -> str | None:
    """Why README.md#security refuses this connection, or None when it may go ahead.

    TLS always may; plaintext to loopback hosts may; plaintext elsewhere needs
    ``allow_plaintext`` and never carries credentials. The one rule for every connection relayd
    opens, to Redis or to a sink's broker: ``service`` and ``secure`` (how to get TLS) only word it.
    """
    if tls:
        return None
    remote = [host for host in hosts if not is_loopback(host)]
    if not remote:
        return None
    if credentials:
        return f"refusing to send {service} credentials over plaintext to {remote[0]!r}; use {secure}"
    if not allow_plaintext:
        host = remote[0]
        return f"plaintext {service} to non-loopback host {host!r} needs --allow-plaintext (or use {secure})"
    return None


def check_redis_url(url: str, sink: str, *, allow_plaintext: bool) -> None:
    """Enforce README.md#security on a sink's destination Redis URL (``unix://`` sockets are local).

    Raises:
        ConfigError: the URL breaks the policy (its password is never shown).
    """
    if url.partition("://")[0].lower() == "unix":
        return
    try:
        parsed = parse_url(url)
    except ValueError as exc:
        raise ConfigError(f"sink {sink!r}: {exc}") from None
    if any(key.lower().startswith("ssl") for key, _ in parse_qsl(parsed.query)):
        # verification is not negotiable (README.md#security); the CA comes from --redis-ca-file
        raise ConfigError(f"sink {sink!r}: TLS options in the URL are not accepted; use --redis-ca-file")
    refusal = plaintext_refusal(
        (host for host, _ in parsed.nodes),
        tls=parsed.tls,
        credentials=parsed.username is not None or parsed.password is not None,
        allow_plaintext=allow_plaintext,
    )
    if refusal is not None:
        raise ConfigError(f"sink {sink!r}: {refusal}")
