"""``relayd console`` as a subprocess on a free loopback port, for the HTTP and browser tests."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from support.processes import end_process

REPO = Path(__file__).resolve().parents[2]


def console_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAYD_")}
    env["RELAYD_LOG_FORMAT"] = "json"
    env["PYTHONPATH"] = str(REPO)
    return {**env, **(extra or {})}


@dataclass
class ConsoleProcess:
    """A running console; ``url`` has no trailing slash; ``lines`` is what it printed."""

    proc: subprocess.Popen[str]
    url: str
    lines: list[str] = field(default_factory=list)

    def stop(self) -> int | None:
        return end_process(self.proc)


def start_console(redis_url: str, prefixes: list[str], *args: str, timeout_s: float = 60.0) -> ConsoleProcess:
    """Start ``relayd console`` and return once it printed its address (fail after ``timeout_s``)."""
    argv = ["console", "--redis-url", redis_url]
    for prefix in prefixes:
        argv += ["--prefix", prefix]
    return launch_console([*argv, "--console-addr", "127.0.0.1:0", *args], timeout_s=timeout_s)


def launch_console(args: list[str], *, token_line: bool = False, timeout_s: float = 60.0) -> ConsoleProcess:
    """Run ``relayd ARGS`` until it printed the console's address (and, if asked, its token line)."""
    argv = [sys.executable, "-m", "relayd", *args]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=console_env()
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    url: str | None = None
    while True:
        try:
            line = lines.get(timeout=timeout_s)
        except queue.Empty:
            end_process(proc)
            raise AssertionError(f"the console printed no address in {timeout_s}s: {seen}") from None
        if line is None:
            end_process(proc)
            raise AssertionError(f"the console exited before listening: {seen}")
        seen.append(line)
        if line.startswith("relayd console: http://"):
            url = line.split()[2].rstrip("/")
        if url is not None and (not token_line or "access token" in seen[-1]):
            return ConsoleProcess(proc, url, seen)
