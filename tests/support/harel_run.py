"""One harel deployment of ``support.harel_app`` on a prefix: harel's sender, its worker
processes (``python -m harel.worker``), and, when asked, ``relayd sweep`` with the harel sink.

``HarelDeployment`` drives orders the way a harel user does (harel's ``DistributedRunner``:
``create``, ``send``), kills and restarts the worker (``SIGKILL``; or a worker that dies right
after a commit carrying spawns: ``support.harel_crash_worker``), and reads back what matters
for a comparison: every execution's final state and context, the side effects the actions
counted outside Redis (``support.harel_app.ledger_counts``), and what is left in Redis.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import redis
from harel.engine.distributed import DistributedRunner
from harel.engine.store import RedisStore
from harel.engine.transport import RedisTransport
from harel.spec.states import Event
from harel.worker import load_definitions

from support.harel_app import ledger_counts
from support.ports import free_port
from support.processes import end_process

TESTS_DIR = Path(__file__).resolve().parent.parent
REPO_DIR = TESTS_DIR.parent
#: Lease seconds of a claimed group: a SIGKILLed worker's group is claimable again this soon.
VISIBILITY_S = 2


class HarelDeployment:
    """The application under ``prefix``: sender, worker, optional relayd (see the module docstring)."""

    def __init__(
        self,
        redis_url: str,
        prefix: str,
        workdir: Path,
        definitions: Path,
        *,
        relayd_sink_params: str | None,
        relayd_sink: str | None = None,
    ) -> None:
        """``relayd_sink_params``: run relayd with the harel sink and these parameters (None: no
        relayd); ``relayd_sink``: run relayd with this sink instead."""
        self.redis_url, self.prefix, self.workdir, self.definitions = redis_url, prefix, workdir, definitions
        workdir.mkdir(parents=True, exist_ok=True)
        self.ledger = workdir / "ledger.txt"
        self.client = redis.Redis.from_url(redis_url)
        self.runner = DistributedRunner(
            RedisStore(self.client, prefix=prefix),
            RedisTransport(self.client, prefix=prefix),
            load_definitions(str(definitions)),
            execution="inline",
        )
        self.relayd_sink_params = relayd_sink_params
        self.relayd_sink = relayd_sink
        self.worker: subprocess.Popen[bytes] | None = None
        self.relay: subprocess.Popen[bytes] | None = None
        self.relay_port = free_port()
        self.starts = 0

    # --- processes ----------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAYD_", "HAREL_"))}
        path = [str(TESTS_DIR), str(REPO_DIR), env.get("PYTHONPATH", "")]
        return {
            **env,
            "PYTHONPATH": os.pathsep.join(p for p in path if p),
            "HAREL_APP_LEDGER": str(self.ledger),
        }

    def start_worker(self, *, crash_after_spawns: bool = False) -> None:
        env = {
            **self._env(),
            "HAREL_STORE_BACKEND": "redis",
            # a pool larger than redis-py 8's default of 100: harel's relay creates every pending
            # child at once, over one connection each ("Too many connections" otherwise)
            "HAREL_REDIS_URL": f"{self.redis_url}?max_connections=1000",
            "HAREL_PREFIX": self.prefix,
            "HAREL_DEFINITIONS_DIR": str(self.definitions),
            "HAREL_VISIBILITY": str(VISIBILITY_S),
            # one event at a time: harel's worker fires due timers whenever nothing is claimable,
            # events in flight or not, so with more than one a timer can overtake a Paid being
            # handled and harel alone is not deterministic after an outage
            "HAREL_CONCURRENCY": "1",
            "HAREL_WORKER_ID": f"{self.prefix}-{self.starts}",
        }
        module = "harel.worker"
        if crash_after_spawns:
            module = "support.harel_crash_worker"
            env["HAREL_CRASH_MARKER"] = str(self.workdir / f"crashed-{self.starts}")
        self.starts += 1
        with (self.workdir / "worker.log").open("ab") as log:
            self.worker = subprocess.Popen([sys.executable, "-m", module], stdout=log, stderr=log, env=env)

    def kill_worker(self) -> None:
        """SIGKILL: no shutdown, its leases run out (``VISIBILITY_S``)."""
        end_process(self.worker, signal.SIGKILL)
        self.worker = None

    def worker_exited(self) -> bool:
        return self.worker is not None and self.worker.poll() is not None

    def start_relayd(self) -> None:
        if self.relayd_sink is not None:
            sink = self.relayd_sink
        elif self.relayd_sink_params is not None:
            sink = f"harel:{self.redis_url}?definitions={self.definitions}"
            sink += f"&{self.relayd_sink_params}" if self.relayd_sink_params else ""
        else:
            return
        argv = [
            sys.executable, "-m", "relayd", "sweep", "--redis-url", self.redis_url, "--prefix", self.prefix,
            "--sink", sink, "--poll-interval", "0.2", "--metrics-addr", f"127.0.0.1:{self.relay_port}",
            "--log-format", "json", "--log-level", "warning",
        ]  # fmt: skip
        with (self.workdir / "relayd.log").open("ab") as log:
            self.relay = subprocess.Popen(argv, stdout=log, stderr=log, env=self._env())

    def stop(self) -> None:
        end_process(self.worker)
        end_process(self.relay)
        self.client.close()

    def logs(self) -> str:
        text = ""
        for name in ("worker.log", "relayd.log"):
            path = self.workdir / name
            if path.exists():
                text += f"--- {name}\n{path.read_text(errors='replace')[-2500:]}\n"
        return text

    # --- driving ------------------------------------------------------------------------
    def create_orders(self, ids: list[str]) -> None:
        for order in ids:
            self.runner.create("order", execution_id=order)
            self.runner.send(order, Event(id=f"go-{order}", kind="Go"))

    def pay(self, ids: list[str]) -> None:
        for order in ids:
            self.runner.send(order, Event(id=f"paid-{order}", kind="Paid"))

    # --- reading back -------------------------------------------------------------------
    def executions(self) -> dict[str, dict[str, Any]]:
        """Every execution's id -> what must be equal to harel alone's."""
        found = {}
        for key in self.client.scan_iter(match=f"{self.prefix}:exe:*", count=500):
            record = json.loads(self.client.get(key) or "null")
            if record is None:
                continue
            found[record["id"]] = {
                name: record.get(name)
                for name in ("definition_id", "status", "active_path", "context", "parent_id", "outcome")
            }
        return found

    def statuses(self, ids: list[str]) -> dict[str, str | None]:
        records = self.client.mget([f"{self.prefix}:exe:{i}" for i in ids])
        return {i: json.loads(r)["status"] if r else None for i, r in zip(ids, records, strict=True)}

    def all_final(self, ids: list[str]) -> bool:
        return all(status in ("DONE", "FAILED") for status in self.statuses(ids).values())

    def regions_waiting(self, ids: list[str]) -> bool:
        """Every order's Payment region exists and waits for Paid (its timer armed)."""
        keys = [f"{self.prefix}:exe:{i}:Work.Payment:0" for i in ids]
        records = self.client.mget(keys)
        return all(r is not None and json.loads(r)["active_path"] == "Work.Payment.AwaitPay" for r in records)

    def timeouts_fired(self) -> list[str]:
        """The groups a ``Timeout`` is queued in (published, not yet handled)."""
        return [
            key.decode()
            for key in self.client.scan_iter(match=f"{self.prefix}:q:*")
            if b'"Timeout"' in b"".join(self.client.lrange(key, 0, -1))
        ]

    def side_effects(self) -> dict[tuple[str, str], int]:
        return dict(ledger_counts(self.ledger))

    def leftovers(self) -> dict[str, object]:
        """What must be empty once every order is final: harel's outbox, spawns, timers and
        queues, and relayd's dead letters."""
        p = self.prefix
        return {
            "outbox": self.client.hlen(f"{p}:outbox"),
            "spawns": self.client.hlen(f"{p}:spawns"),
            "timers": self.client.zcard(f"{p}:timers"),
            "queued": sorted(
                k.decode() for k in self.client.scan_iter(match=f"{p}:q:*") if self.client.llen(k)
            ),
            "dead": sum(self.client.hlen(f"{p}:relay:dead:{kind}") for kind in ("outbox", "spawn", "timer")),
        }

    def _queued(self) -> list[str]:
        keys = self.client.scan_iter(match=f"{self.prefix}:q:*")
        return sorted(key.decode() for key in keys if self.client.llen(key))

    def drained(self) -> bool:
        left = self.leftovers()
        return not any(left.values())

    def relay_counts(self) -> dict[str, int]:
        raw = self.client.hgetall(f"{self.prefix}:relay:harel")
        return {k.decode(): int(v) for k, v in raw.items()}
