"""Secret files written and rotated the two ways an operator's platform does it.

``replace``: each file is rewritten atomically (a temporary file beside it, then ``os.replace``),
as a config-management tool or an operator's script does. ``kubelet``: a Kubernetes Secret
volume: the data lives in a timestamped directory, ``..data`` is a symlink to it and each
file a symlink through ``..data``; an update writes a new directory and flips ``..data`` with
one atomic rename, then removes the old directory.

``break_file`` makes a file unreadable the ways that work as root too: a directory in its
place, or (kubelet) ``..data`` pointing at a directory that does not exist.
"""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path
from typing import Literal

Mode = Literal["replace", "kubelet"]
MODES: tuple[Mode, ...] = ("replace", "kubelet")


class SecretDir:
    """A directory of secret files, updated as ``mode`` says (see the module docstring)."""

    def __init__(self, root: Path, mode: Mode) -> None:
        self.root = root
        self.mode = mode
        self._versions = itertools.count(1)
        root.mkdir(parents=True, exist_ok=True)

    def path(self, name: str) -> Path:
        return self.root / name

    def write(self, files: dict[str, str | bytes]) -> None:
        """Put these files in place (the first time, or as a rotation)."""
        if self.mode == "replace":
            for name, content in files.items():
                _atomic_write(self.root / name, content)
            return
        version = self.root / f"..2026_12_02_{next(self._versions):04d}"
        version.mkdir()
        old = self._data_target()
        if old is not None:  # a Secret update carries every key, changed or not
            for kept in old.iterdir():
                shutil.copy2(kept, version / kept.name)
        for name, content in files.items():
            (version / name).write_bytes(content.encode() if isinstance(content, str) else content)
            link = self.root / name
            if not link.is_symlink():
                link.symlink_to(Path("..data") / name)
        self._flip_data(version.name)
        if old is not None:
            shutil.rmtree(old)

    def break_file(self, name: str) -> None:
        """Make ``name`` unreadable: a directory in its place, or a dangling ``..data``."""
        if self.mode == "replace":
            path = self.root / name
            path.unlink()
            path.mkdir()
            return
        self._flip_data("..2026_12_02_gone")

    def _data_target(self) -> Path | None:
        data = self.root / "..data"
        if not data.is_symlink():
            return None
        target = self.root / os.readlink(data)
        return target if target.is_dir() else None

    def _flip_data(self, target: str) -> None:
        temporary = self.root / "..data_tmp"
        temporary.symlink_to(target)
        os.replace(temporary, self.root / "..data")


def _atomic_write(path: Path, content: str | bytes) -> None:
    if path.is_dir():
        path.rmdir()  # a file broken by break_file comes back as a file
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_bytes(content.encode() if isinstance(content, str) else content)
    os.replace(temporary, path)
