"""Parse and check an ``amqp:`` sink spec's target: broker URL, exchange, routing-key template.

Pure: no I/O and no AMQP client import, so a spec is checked before anything connects (and
without the optional extra installed). The grammar (docs/sinks.md)::

    amqp:amqp[s]://[USER@]HOST[:PORT][/VHOST]?routing_key=KEY[&exchange=NAME][&heartbeat=S]

- ``routing_key`` is required and may hold ``{target}``, ``{kind}`` and ``{prefix}``
  (``relayd.sinks.routing``); ``exchange`` defaults to the default exchange (``""``, which
  routes by queue name).
- The password never comes from the spec (it would sit in a flag's value, a process listing and
  shell history): it comes from ``--amqp-password-file``. A URL with a password is refused,
  and the error does not show it.
- ``amqps://`` always verifies the broker's certificate (``--amqp-ca-file`` replaces the system
  store); TLS options in the URL (``no_verify_ssl``, ``cafile``, ...) are refused. Plaintext to
  a host that is not loopback needs ``--allow-plaintext``, and a password file is never sent
  over it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import unquote, urlsplit

from relayd.errors import ConfigError
from relayd.sinks.target_rules import check_plaintext, sink_params

if TYPE_CHECKING:
    from yarl import URL

EXAMPLE: Final = "amqp:amqp://HOST:5672/VHOST?exchange=NAME&routing_key=events.{target}"
DEFAULT_PORTS: Final = {"amqp": 5672, "amqps": 5671}
#: Query parameters the sink reads; anything else is a mistake worth one line, not a silent no-op.
_PARAMS: Final = ("exchange", "routing_key", "heartbeat")


@dataclass(frozen=True, slots=True)
class AmqpTarget:
    """Where and how the ``amqp`` sink publishes (no secret in it)."""

    tls: bool
    host: str
    port: int
    vhost: str
    username: str | None
    exchange: str
    routing_key: str
    heartbeat_s: int | None = None

    @property
    def display(self) -> str:
        """The broker as an operator may see it in logs: scheme, host, port and vhost."""
        return f"{'amqps' if self.tls else 'amqp'}://{self.host}:{self.port}/{self.vhost}"

    def connection_url(self, password: str | None) -> URL:
        """The URL aiormq connects with: the user and ``password`` (``guest`` for either left
        out) and the heartbeat. The vhost is not in it: the caller sets it on the connection, so
        no quoting rules can get it wrong."""
        from yarl import URL

        query = {"heartbeat": str(self.heartbeat_s)} if self.heartbeat_s is not None else {}
        return URL.build(
            scheme="amqps" if self.tls else "amqp",
            user=self.username or "guest",
            password=password or "guest",
            host=self.host,
            port=self.port,
            query=query,
        )


def parse_amqp_target(
    text: str, *, has_password_file: bool = False, allow_plaintext: bool = False
) -> AmqpTarget:
    """Parse the part of an ``amqp:`` spec after ``amqp:``.

    Raises:
        ConfigError: one line saying what is wrong; never the URL's password.
    """
    url, params = sink_params(
        text, "amqp", _PARAMS, note="TLS is verified, with --amqp-ca-file for a private CA"
    )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"sink 'amqp': malformed URL ({exc}); expected e.g. {EXAMPLE!r}") from None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ConfigError(f"sink 'amqp' needs an amqp:// or amqps:// URL with a host: {EXAMPLE!r}")
    if parts.password is not None:
        raise ConfigError(
            "sink 'amqp': no password in the URL; put it in a file named by --amqp-password-file"
        )
    routing_key = params.get("routing_key", "")
    if not routing_key:
        raise ConfigError(f"sink 'amqp' needs a routing key: {EXAMPLE!r}")
    if len(routing_key.encode()) > 255 and "{" not in routing_key:
        raise ConfigError("sink 'amqp': a routing key is at most 255 bytes")
    tls = parts.scheme == "amqps"
    host = parts.hostname or ""
    check_plaintext(
        [host],
        "amqp",
        tls=tls,
        credentials=has_password_file,
        allow_plaintext=allow_plaintext,
        secure="amqps://",
    )
    heartbeat = params.get("heartbeat")
    if heartbeat is not None and not heartbeat.isdigit():
        raise ConfigError(f"sink 'amqp': heartbeat must be whole seconds, got {heartbeat[:20]!r}")
    return AmqpTarget(
        tls=tls,
        host=host,
        port=port or DEFAULT_PORTS[parts.scheme],
        vhost=unquote(parts.path[1:]) if len(parts.path) > 1 else "/",
        username=unquote(parts.username) if parts.username else None,
        exchange=params.get("exchange", ""),
        routing_key=routing_key,
        heartbeat_s=int(heartbeat) if heartbeat is not None else None,
    )
