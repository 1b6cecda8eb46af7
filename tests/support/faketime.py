"""libfaketime for a child process: its clock moved, through ``LD_PRELOAD`` and ``FAKETIME``.

Preloaded straight, not through the ``faketime`` wrapper: the wrapper keeps a POSIX semaphore
and a shared-memory segment named after its pid, which a killed wrapper leaves in ``/dev/shm``,
and a later wrapper given the same pid then fails (``sem_open: File exists``) before the child
runs. The library alone keeps no such state, and signals reach the child itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

import pytest

#: Installed by Debian's ``faketime`` package (``.ci/run`` installs it).
LIBFAKETIME: Final = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


def faked_clock(offset: str) -> dict[str, str]:
    """The environment variables that move a child's clock by ``offset`` (``"+120s"``, ``"-120s"``)."""
    if not Path(LIBFAKETIME).exists():
        pytest.skip(f"{LIBFAKETIME} missing (the faketime package installs it)")
    return {"LD_PRELOAD": LIBFAKETIME, "FAKETIME": offset}


def faked_offset_s(faking: dict[str, str]) -> float:
    """How far a child Python's ``time.time()`` is moved under ``faking`` (checks it works)."""
    before = time.time()
    out = subprocess.run(
        [sys.executable, "-c", "import time; print(time.time())"],
        env={**os.environ, **faking},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(out) - before
