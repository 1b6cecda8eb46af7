"""Which local TCP ports a process has open, from ``/proc`` (Linux): to tell its Redis
connections apart in ``MONITOR`` output."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir() if fd_dir.exists() else ():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    return inodes


def local_tcp_ports(pid: int, *, remote_port: int) -> set[int]:
    """Local ports of ``pid``'s TCP connections to ``remote_port`` (IPv4 and IPv6)."""
    inodes = _socket_inodes(pid)
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, remote, inode = fields[1], fields[2], fields[9]
                if inode in inodes and int(remote.rsplit(":", 1)[1], 16) == remote_port:
                    ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports
