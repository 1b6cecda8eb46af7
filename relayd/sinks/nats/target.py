"""Parse and check the ``nats:`` sink target and its subject template.

Pure: no I/O and no NATS client import, so a spec is checked before anything connects (and
without the ``nats`` extra installed). The grammar (docs/brokers.md)::

    nats:nats://HOST:PORT[,nats://HOST:PORT...]?subject=NAME[&timeout_s=S]

``NAME`` may hold ``{target}`` (the envelope's ordering key, ``_`` when it has none),
``{kind}`` and ``{prefix}`` (filled by ``relayd.sinks.routing``). The sink uses TLS for
``tls://`` server URLs or when a CA file is configured. ``timeout_s`` bounds how long a batch
waits for its confirmations (``relayd.sinks.target_rules.timeout_param``). Credentials never
come from a server URL: they come from the sink's own options.

Plaintext to a host that is not loopback needs ``--allow-plaintext``, and is refused outright
when credentials are configured (README.md#security), as for Redis: the sink checks it, since
it depends on the options.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from relayd.errors import ConfigError
from relayd.sinks.target_rules import placeholder_sample, sink_params, timeout_param, url_parts

#: A NATS subject: dot-separated tokens without whitespace or wildcards.
_NATS_TOKEN: Final = re.compile(r"[^\s.*>]+")


@dataclass(frozen=True, slots=True)
class NatsTarget:
    """A parsed ``nats:`` target."""

    servers: tuple[str, ...]
    subject: str
    tls: bool
    timeout_s: float

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(urlsplit(server).hostname or "" for server in self.servers)


def parse_nats_target(text: str) -> NatsTarget:
    """Parse what follows ``nats:``.

    Raises:
        ConfigError: one line naming what is wrong (a server URL's password is never shown).
    """
    servers_text, params = sink_params(text, "nats", ("subject", "timeout_s"))
    servers = []
    for item in (part.strip() for part in servers_text.split(",")):
        parts = url_parts(item, "sink 'nats': malformed server URL")
        if parts.scheme not in ("nats", "tls") or not parts.hostname:
            raise ConfigError("sink 'nats' needs nats://HOST:PORT (or tls://) server URLs")
        if parts.username or parts.password:
            raise ConfigError("sink 'nats': credentials in the URL are refused; use --nats-creds-file")
        servers.append(item)
    subject = params.get("subject", "")
    if not subject:
        raise ConfigError("sink 'nats' needs a subject: 'nats:nats://HOST:PORT?subject=NAME'")
    if not nats_subject_ok(placeholder_sample(subject)):
        raise ConfigError(f"sink 'nats': {subject[:60]!r} is not a valid NATS subject")
    tls = any(server.startswith("tls://") for server in servers)
    return NatsTarget(tuple(servers), subject, tls, timeout_param(params, "nats"))


def nats_subject_ok(subject: str) -> bool:
    """Whether ``subject`` is a literal NATS subject a message can be published to."""
    return all(_NATS_TOKEN.fullmatch(token) for token in subject.split("."))
