"""``HOST:PORT`` of relayd's own listeners (``--metrics-addr``, ``--console-addr``)."""

from __future__ import annotations


def parse_host_port(addr: str) -> tuple[str, int]:
    """Split ``HOST:PORT`` (``[::1]:9464`` for IPv6); port 0 asks the OS for a free one."""
    host, sep, port_text = addr.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"expected HOST:PORT, got {addr!r}")
    return host, int(port_text)
