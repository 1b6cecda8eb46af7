"""Ending child processes the tests start (redis-server, relayd): signal, reap, never leak."""

from __future__ import annotations

import signal
import subprocess
from typing import Any


def end_process(
    proc: subprocess.Popen[Any] | None, signum: int = signal.SIGTERM, wait_s: float = 5.0
) -> int | None:
    """Send ``signum`` to ``proc`` if it still runs and reap it, with SIGKILL if it outlives
    ``wait_s``; return its exit code (None without a process)."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(signum)
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode
