"""Parse a Redis URL of any topology relayd and the store accept into a ``RedisUrl``.

Pure: no I/O and no redis import. The forms (docs/configuration.md):

    redis://[USER:PASS@]HOST[:PORT][/DB]                              one server (PORT 6379)
    rediss://...                                                      the same over verified TLS
    redis+cluster://[USER:PASS@]HOST[:PORT]                           any seed node of a cluster
    rediss+cluster://...
    redis+sentinel://[USER:PASS@]HOST[:PORT][,HOST[:PORT]...]/SERVICE_NAME[/DB]
    rediss+sentinel://...                                             sentinels (PORT 26379)

For Sentinel, ``USER:PASS`` are the credentials of the master the sentinels name (the data
node), as they are for ``redis://``; the sentinels' own credentials never ride in the URL
(relayd reads them from ``--sentinel-username-file`` / ``--sentinel-password-file``, the store
takes ``sentinel_username=`` / ``sentinel_password=``). ``+sentinel`` over TLS (``rediss``)
means TLS to the sentinels and to the master.

Error messages never carry the password: the URL is shown with its user information
replaced by ``***``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import unquote

Topology = Literal["standalone", "cluster", "sentinel"]

#: Every scheme, mapped to (tls, topology).
SCHEMES: Final[dict[str, tuple[bool, Topology]]] = {
    "redis": (False, "standalone"),
    "rediss": (True, "standalone"),
    "redis+cluster": (False, "cluster"),
    "rediss+cluster": (True, "cluster"),
    "redis+sentinel": (False, "sentinel"),
    "rediss+sentinel": (True, "sentinel"),
}
#: Port of a Redis server when the URL names none.
DEFAULT_PORT: Final = 6379
#: Port of a sentinel when the URL names none (Redis Sentinel's own default).
DEFAULT_SENTINEL_PORT: Final = 26379

# scheme://userinfo@hosts: the user information is everything up to the last "@" before the
# path, so a password holding an unescaped "@" is still hidden whole. Linear in the text: a
# match is tried only where a run of scheme characters starts (the look-behind), the run is
# taken whole (possessive) and its leading non-letters set aside, so a long run with no "://"
# after it is scanned once, not once per position (which made a 64 KB word take seconds).
_USERINFO: Final = re.compile(
    r"(?<![A-Za-z0-9+.-])(?P<lead>[0-9+.-]*+)(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*+://)[^/?#\s\"']*@"
)
_NODE: Final = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^:\[\]]+))(?::(?P<port>[^:]*))?$")


def redact_url(text: str) -> str:
    """Replace the user information (``user:pass@``) of every URL in ``text`` with ``***@``.

    The username goes too: a URL with a user part alone often carries a token there.
    """
    if "://" not in text:  # most log values: no URL, no scan
        return text
    return _USERINFO.sub(r"\g<lead>\g<scheme>***@", text)


@dataclass(frozen=True, slots=True, repr=False)
class RedisUrl:
    """A parsed Redis URL; ``password`` never appears in ``repr`` (``display`` is redacted)."""

    scheme: str
    tls: bool
    topology: Topology
    #: (host, port) of the server, the seed node, or every sentinel, in URL order
    nodes: tuple[tuple[str, int], ...]
    db: int
    username: str | None
    password: str | None
    #: the master's service name (Sentinel only)
    service: str | None
    #: the query string as written (without ``?``); each caller decides what it accepts
    query: str
    display: str

    @property
    def host(self) -> str:
        return self.nodes[0][0]

    @property
    def port(self) -> int:
        return self.nodes[0][1]

    def __repr__(self) -> str:
        return f"RedisUrl({self.display!r})"


def parse_url(url: str) -> RedisUrl:
    """Parse any form of the module docstring.

    Raises:
        ValueError: with a message that never contains the password.
    """
    shown = redact_url(url)
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        schemes = ", ".join(f"{s}://" for s in SCHEMES)
        raise ValueError(f"Redis URL {shown!r} must start with one of {schemes}")
    scheme = scheme.lower()
    tls, topology = SCHEMES[scheme]
    rest, _, fragment = rest.partition("#")
    rest, _, query = rest.partition("?")
    if fragment:
        query = query or "#"  # a fragment is an option too: refused wherever a query is
    netloc, _, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    username, password = _credentials(userinfo) if at else (None, None)
    default_port = DEFAULT_SENTINEL_PORT if topology == "sentinel" else DEFAULT_PORT
    nodes = tuple(_node(text, default_port, shown) for text in hosts.split(","))
    if topology != "sentinel" and len(nodes) > 1:
        raise ValueError(f"Redis URL {shown!r} names several hosts; only +sentinel takes a list")
    service, db = _path(path, topology, shown)
    return RedisUrl(
        scheme=scheme,
        tls=tls,
        topology=topology,
        nodes=nodes,
        db=db,
        username=username,
        password=password,
        service=service,
        query=query,
        display=shown,
    )


def _credentials(userinfo: str) -> tuple[str | None, str | None]:
    user, colon, password = userinfo.partition(":")
    return (unquote(user) or None, unquote(password) if colon and password else None)


def _node(text: str, default_port: int, shown: str) -> tuple[str, int]:
    match = _NODE.match(text.strip())
    if match is None:
        raise ValueError(f"Redis URL {shown!r} has no host" if not text else f"malformed Redis URL {shown!r}")
    port_text = match["port"]
    if port_text is None or port_text == "":
        port = default_port
    elif port_text.isdigit() and 0 < int(port_text) <= 65535:
        port = int(port_text)
    else:
        raise ValueError(f"malformed Redis URL {shown!r}: bad port")
    return (unquote(match["v6"] or match["host"]), port)


def _path(path: str, topology: Topology, shown: str) -> tuple[str | None, int]:
    parts = [unquote(p) for p in path.split("/") if p]
    service = None
    if topology == "sentinel":
        if not parts:
            raise ValueError(f"Redis URL {shown!r} needs the master's name: .../SERVICE_NAME[/DB]")
        service, parts = parts[0], parts[1:]
    if len(parts) > 1:
        raise ValueError(f"Redis URL {shown!r}: unexpected path {path!r}")
    db_text = parts[0] if parts else ""
    if db_text and not db_text.isdigit():
        raise ValueError(f"Redis URL {shown!r}: database must be a number, got {db_text!r}")
    db = int(db_text) if db_text else 0
    if topology == "cluster" and db != 0:
        raise ValueError(f"Redis URL {shown!r}: a cluster has only database 0")
    return service, db
