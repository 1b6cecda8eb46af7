"""A private Docker daemon and a stand-in base image made with debootstrap (docs/image.md).

No image registry can be reached here, so the image test makes its own base: a minimal
Debian bookworm with Python from the Debian mirror apt already uses, with the host's extra CA
certificates (outbound TLS is intercepted, and the build's pip must trust it), imported into
a dockerd of its own (own data root, exec root, socket and pidfile; no iptables, no bridge:
builds and containers use the host network).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.processes import end_process

#: Debian's docker.io client. ``/usr/local/bin/docker`` may be another build, ahead on PATH.
DOCKER = "/usr/bin/docker"

#: What the Dockerfile's stages need from the base: an interpreter, venv, pip, and the CAs.
BASE_PACKAGES = ("python3", "python3-venv", "python3-pip", "python-is-python3", "ca-certificates")

DEFAULT_MIRROR = "http://deb.debian.org/debian"


@dataclass
class PrivateDockerd:
    """``dockerd`` on a unix socket of its own, everything under one temporary directory."""

    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="relayd-docker-", dir="/tmp")))
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def host(self) -> str:
        return f"unix://{self.root / 'd.sock'}"

    @property
    def log_path(self) -> Path:
        return self.root / "dockerd.log"

    def start(self, timeout_s: float = 60.0) -> None:
        argv = [
            "dockerd",
            "--data-root", str(self.root / "data"),
            "--exec-root", str(self.root / "exec"),
            "--pidfile", str(self.root / "dockerd.pid"),
            "-H", self.host,
            "--iptables=false",
            "--bridge=none",
        ]  # fmt: skip
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while self.docker("version", check=False, timeout_s=10).returncode != 0:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dockerd did not start: {self.log_tail()}")
            time.sleep(0.2)

    def docker(
        self, *args: str, check: bool = True, timeout_s: float = 120.0, stdin: Any = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the docker client against this daemon (BuildKit on, for ``RUN --mount``)."""
        env = {**os.environ, "DOCKER_BUILDKIT": "1", "DOCKER_CONFIG": str(self.root / "client")}
        result = subprocess.run(
            [DOCKER, "-H", self.host, *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            stdin=stdin,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"docker {' '.join(args[:2])} failed: {result.stderr[-3000:]}")
        return result

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop the daemon (it stops its containers and its containerd) and remove its files."""
        end_process(self.proc, wait_s=60)
        self.proc = None
        # dockerd leaves its default network namespace bind-mounted under the exec root
        for mount in sorted(_mounts_under(self.root), reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def _mounts_under(root: Path) -> list[str]:
    with open("/proc/mounts", encoding="utf-8") as mounts:
        points = [line.split()[1] for line in mounts if len(line.split()) > 1]
    return [p for p in points if p.startswith(f"{root}/")]


def debian_mirror(sources: Iterable[tuple[str, str]], suite: str = "bookworm") -> str:
    """The first ``deb`` URI serving ``suite`` in apt's sources, ``(file name, text)`` pairs.

    Reads both formats: deb822 ``*.sources`` stanzas and one-line ``*.list`` entries.
    Falls back to ``DEFAULT_MIRROR``.
    """
    for name, text in sources:
        if name.endswith(".sources"):
            for stanza in re.split(r"\n\s*\n", text):
                fields = _deb822(stanza)
                if "deb" in fields.get("types", "").split() and suite in fields.get("suites", "").split():
                    uris = fields.get("uris", "").split()
                    if uris:
                        return uris[0]
        elif name.endswith(".list"):
            for line in text.splitlines():
                words = re.sub(r"\[[^\]]*\]", "", line.split("#", 1)[0]).split()
                if len(words) >= 3 and words[0] == "deb" and words[2] == suite:
                    return words[1]
    return DEFAULT_MIRROR


def _deb822(stanza: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in stanza.splitlines():
        if line.startswith("#") or ":" not in line or line[:1].isspace():
            continue
        key, value = line.split(":", 1)
        fields[key.strip().lower()] = value.strip()
    return fields


def apt_sources(etc_apt: Path = Path("/etc/apt")) -> list[tuple[str, str]]:
    """``(file name, text)`` of apt's source files, ``sources.list`` first."""
    files = [etc_apt / "sources.list", *sorted((etc_apt / "sources.list.d").glob("*"))]
    return [(f.name, f.read_text(errors="replace")) for f in files if f.is_file()]


def make_base_rootfs(
    rootfs: Path, mirror: str, ca_dir: Path = Path("/usr/local/share/ca-certificates")
) -> None:
    """debootstrap a minimal bookworm with Python into ``rootfs``, trusting the host's extra CAs."""
    argv = ["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}"]
    _run([*argv, "bookworm", str(rootfs), mirror], timeout_s=900)
    target = rootfs / "usr/local/share/ca-certificates"
    if ca_dir.is_dir():
        shutil.copytree(ca_dir, target, dirs_exist_ok=True)
    _run(["chroot", str(rootfs), "update-ca-certificates"], timeout_s=120)
    # the downloaded .debs and package lists are no part of a base image
    for leftovers in (rootfs / "var/cache/apt/archives", rootfs / "var/lib/apt/lists"):
        for path in leftovers.glob("*"):
            if path.is_file():
                path.unlink()


def import_rootfs(dockerd: PrivateDockerd, rootfs: Path, tag: str) -> None:
    """``tar -C rootfs -c . | docker import - tag``."""
    with subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE) as tar:
        dockerd.docker("import", "-", tag, stdin=tar.stdout, timeout_s=300)
    if tar.returncode != 0:
        raise RuntimeError(f"tar of {rootfs} failed ({tar.returncode})")


def _run(argv: list[str], timeout_s: float) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"{argv[0]} failed ({result.returncode}): {(result.stdout + result.stderr)[-3000:]}"
        )
