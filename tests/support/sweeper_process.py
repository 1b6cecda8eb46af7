"""A long-running ``relayd sweep`` subprocess with its log, metrics port and probes, for e2e tests.

``SweepProcess`` starts ``relayd sweep ARGS --metrics-addr 127.0.0.1:<free port>`` (JSON logs
into a file), and reads what an operator would: ``/readyz``, ``/metrics``, the log lines. The
test ends it with ``stop()`` (SIGTERM, then SIGKILL after a grace) and gets its exit code.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import orjson

from support.health import readyz
from support.ports import pick_ports
from support.processes import end_process


class SweepProcess:
    """One ``relayd sweep`` subprocess (see the module docstring)."""

    def __init__(self, args: list[str], log_path: Path) -> None:
        self.port = pick_ports(1, random.Random())[0]
        self.log_path = log_path
        env = {k: v for k, v in os.environ.items() if not k.startswith("RELAYD_")}
        argv = [
            sys.executable, "-m", "relayd", "sweep", *args,
            "--metrics-addr", f"127.0.0.1:{self.port}", "--log-format", "json",
        ]  # fmt: skip
        with log_path.open("wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def readyz(self) -> tuple[int, str]:
        return readyz(self.port)

    def metric(self, name: str, **labels: str) -> float | None:
        """A sample of ``/metrics`` (None when absent or while the server does not answer)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2) as answer:
                text = answer.read().decode()
        except OSError:
            return None
        wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
        for line in text.splitlines():
            metric, _, value = line.rpartition(" ")
            if metric.partition("{")[0] != name:
                continue
            found = ",".join(sorted(metric.partition("{")[2].rstrip("}").split(","))) if "{" in metric else ""
            if found == wanted:
                return float(value)
        return None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def events(self, name: str) -> list[dict[str, object]]:
        """The JSON log lines whose ``event`` is ``name``."""
        found = []
        for line in self.log_path.read_bytes().splitlines():
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict) and record.get("event") == name:
                found.append(record)
        return found

    def stop(self) -> int | None:
        return end_process(self.proc, signal.SIGTERM, wait_s=20)
