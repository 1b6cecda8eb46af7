"""Pure rules of ``--webhook-proxy-url`` and ``--webhook-no-proxy``: which requests go through the
forward proxy.

The proxy is ``http://HOST:PORT``: an ``https://`` webhook (or token endpoint) is reached through
a ``CONNECT`` tunnel, inside which TLS is verified against the receiver as without a proxy; an
``http://`` one is sent to the proxy as an absolute-form request. The proxy's credentials come
only from ``--webhook-proxy-username-file`` and ``--webhook-proxy-password-file``: a URL with user
info is refused, so a password never sits in a flag, a variable or a process listing.

``--webhook-no-proxy`` lists the hosts reached directly, comma-separated: a name matches itself and
its subdomains (``example.com`` and ``.example.com`` both match ``hooks.example.com``), an IP
address matches itself, a CIDR block (``10.0.0.0/8``) the addresses in it, ``*`` every host. Ports
are not compared. The standard ``HTTP_PROXY``, ``HTTPS_PROXY`` and ``NO_PROXY`` variables are not
read (docs/sinks.md, "Forward proxy").
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class NoProxy:
    """The parsed ``--webhook-no-proxy`` list."""

    every_host: bool = False
    names: tuple[str, ...] = ()
    networks: tuple[IpNetwork, ...] = ()

    def bypasses(self, host: str) -> bool:
        """Whether requests to ``host`` (a name or an IP address) go around the proxy."""
        if self.every_host:
            return True
        host = host.strip("[]").lower().rstrip(".")
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return any(host == name or host.endswith("." + name) for name in self.names)
        return any(address in network for network in self.networks)


def parse_no_proxy(text: str | None) -> NoProxy:
    """``--webhook-no-proxy`` as a ``NoProxy`` (None or blank: no host bypasses the proxy).

    Raises:
        ValueError: an entry that is neither a host name, an IP address, a CIDR block nor ``*``.
    """
    names: list[str] = []
    networks: list[IpNetwork] = []
    for raw in (text or "").split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return NoProxy(every_host=True)
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            continue
        except ValueError:
            pass
        name = entry.lstrip(".").rstrip(".")
        if not name or any(not part or not part.replace("-", "").isalnum() for part in name.split(".")):
            raise ValueError(
                f"--webhook-no-proxy: {entry!r} is not a host name, IP address, CIDR block or '*'"
            )
        names.append(name)
    return NoProxy(names=tuple(names), networks=tuple(networks))


def check_proxy_url(url: str) -> str:
    """The proxy URL, checked: ``http://HOST:PORT`` without credentials, path or query.

    Raises:
        ValueError: one line that never shows the URL's credentials.
    """
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            "--webhook-proxy-url holds credentials; give them in --webhook-proxy-username-file "
            "and --webhook-proxy-password-file"
        )
    if parts.scheme.lower() != "http":
        raise ValueError("--webhook-proxy-url must be http://HOST:PORT")
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or port is None or parts.path not in {"", "/"} or parts.query or parts.fragment:
        raise ValueError("--webhook-proxy-url must be http://HOST:PORT")
    return url
