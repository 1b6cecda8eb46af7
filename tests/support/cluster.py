"""Start a real Redis Cluster on loopback for tests, break it, and wait for it to heal.

``RedisCluster(masters=3, replicas=1)`` starts ``masters * (1 + replicas)`` redis-server
processes with ``--cluster-enabled yes``, joins them with ``redis-cli --cluster create``, and
waits until every node reports ``cluster_state:ok`` and every replica's link is up. Nodes keep
nothing on disk beyond their ``nodes.conf`` (``--save "" --appendonly no``); the whole temp
directory is removed by ``stop()``, which the context manager always calls.

Start-up is lean on purpose (a few seconds): replicas sync diskless without delay, and the
node timeout is 1 s, so a killed master is failed over in about two to three seconds.
"""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import TracebackType

import redis
from redis.cluster import RedisCluster as ClusterClient
from redis.crc import key_slot

from support.ports import pick_ports
from support.processes import end_process
from support.topology import NodeInfo, failover_done, parse_cluster_info, parse_cluster_nodes

#: How long a node may be unreachable before the cluster fails it over, in milliseconds.
NODE_TIMEOUT_MS = 1000
#: Poll interval while waiting for the cluster to converge, in seconds.
POLL_S = 0.05


class ClusterError(RuntimeError):
    """The test cluster did not start or did not converge in time."""


class PortTaken(ClusterError):
    """A node could not bind its port: something else took it between the pick and the start."""

    def __init__(self, port: int) -> None:
        super().__init__(f"port {port} was taken by another process")
        self.port = port


@dataclass
class ClusterNode:
    """One redis-server process of the test cluster."""

    port: int
    dir: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        argv = [
            "redis-server",
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.dir),
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
            # a replica always tries to take over, however long it was cut off from its master
            "--cluster-replica-validity-factor", "0",
            "--save", "",
            "--appendonly", "no",
            # replicas sync at once instead of waiting 5 s for more replicas to batch with
            "--repl-diskless-sync", "yes",
            "--repl-diskless-sync-delay", "0",
            "--loglevel", "warning",
        ]  # fmt: skip
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def client(self) -> redis.Redis:
        """A plain (non-cluster) client on this node only, for admin commands."""
        return redis.Redis(port=self.port, decode_responses=True, socket_timeout=1.0)

    def kill(self) -> None:
        """SIGKILL the process (no shutdown, no goodbye to the cluster) and reap it."""
        end_process(self.proc, signal.SIGKILL)

    def replication_info(self) -> dict[str, object] | None:
        """``INFO replication`` as a dict; None when the node does not answer."""
        client = self.client()
        try:
            return dict(client.info("replication"))
        except redis.RedisError:
            return None
        finally:
            client.close()

    def query(self, *args: str) -> str | None:
        """Run one admin command; None when the node does not answer."""
        client = self.client()
        try:
            return str(client.execute_command(*args))  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
        except redis.RedisError:
            return None
        finally:
            client.close()


def _answers(node: ClusterNode) -> bool:
    """The node's own process answers on its port (not another test's server that holds it)."""
    if not node.alive:
        raise PortTaken(node.port)
    client = node.client()
    try:
        pid = client.info("server").get("process_id")
    except redis.RedisError:
        return False
    finally:
        client.close()
    if node.proc is None or pid != node.proc.pid:
        raise PortTaken(node.port)
    return True


class RedisCluster:
    """A real Redis Cluster of ``masters`` masters with ``replicas`` replicas each, on loopback."""

    def __init__(self, masters: int = 3, replicas: int = 0, *, rng: random.Random | None = None) -> None:
        if masters < 3:
            raise ValueError("redis-cli --cluster create needs at least 3 masters")
        self.masters, self.replicas = masters, replicas
        self._rng = rng or random.Random()
        self._root: Path | None = None
        self.nodes: list[ClusterNode] = []
        #: slot ranges each killed master served, so ``wait_failover`` knows what to watch
        self._slots_of_killed: dict[int, tuple[tuple[int, int], ...]] = {}

    # -- lifecycle -----------------------------------------------------------------------

    def start(self, timeout_s: float = 30.0, attempts: int = 3) -> None:
        """Start every node, create the cluster, and wait until it is healthy everywhere.

        Ports are checked free when picked, but a parallel test may bind one before the node
        does: then every node is killed and the start retried on fresh ports.
        """
        for attempt in range(attempts):
            try:
                self._start_once(timeout_s)
                return
            except PortTaken:
                if attempt == attempts - 1:
                    raise

    def _start_once(self, timeout_s: float) -> None:
        self._root = Path(tempfile.mkdtemp(prefix="relayd-cluster-"))
        try:
            ports = pick_ports(self.masters * (1 + self.replicas), self._rng)
            self.nodes = [ClusterNode(port=p, dir=self._root / str(p)) for p in ports]
            for node in self.nodes:
                node.start()
            deadline = time.monotonic() + timeout_s
            for node in self.nodes:
                self._wait(partial(_answers, node), deadline, f"node {node.port} start")
            self._create(deadline)
            self.wait_ok(timeout_s=max(deadline - time.monotonic(), 1.0))
        except BaseException:
            self.stop()
            raise

    def _create(self, deadline: float) -> None:
        argv = [
            "redis-cli", "--cluster", "create",
            *(f"127.0.0.1:{node.port}" for node in self.nodes),
            "--cluster-replicas", str(self.replicas),
            "--cluster-yes",
        ]  # fmt: skip
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=max(deadline - time.monotonic(), 1.0), check=False
        )
        if result.returncode != 0:
            raise ClusterError(f"redis-cli --cluster create failed: {result.stdout[-2000:]}{result.stderr}")

    def stop(self) -> None:
        """Kill every node and remove the cluster's directory (idempotent)."""
        for node in self.nodes:
            node.kill()
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def __enter__(self) -> RedisCluster:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- addressing ----------------------------------------------------------------------

    @property
    def seed_port(self) -> int:
        """The port of a live node, good as a seed for any cluster client."""
        for node in self.nodes:
            if node.alive:
                return node.port
        raise ClusterError("no node of the cluster is alive")

    @property
    def seed_url(self) -> str:
        """``redis+cluster://127.0.0.1:P`` for relayd (docs/configuration.md)."""
        return f"redis+cluster://127.0.0.1:{self.seed_port}"

    def client(self, **kwargs: object) -> ClusterClient:
        """A redis-py cluster client seeded with a live node (caller closes it)."""
        return ClusterClient(host="127.0.0.1", port=self.seed_port, **kwargs)  # type: ignore[arg-type]

    def node(self, port: int) -> ClusterNode:
        return next(node for node in self.nodes if node.port == port)

    def topology(self) -> list[NodeInfo]:
        """``CLUSTER NODES`` as the first live node that answers sees it."""
        for node in self.nodes:
            text = node.query("CLUSTER", "NODES") if node.alive else None
            if text is not None:
                return parse_cluster_nodes(text)
        raise ClusterError("no node of the cluster answers")

    def master_of(self, key: str | bytes) -> ClusterNode:
        """The node serving the slot ``key`` hashes to (hash tags honoured)."""
        slot = key_slot(key.encode() if isinstance(key, str) else key)
        for info in self.topology():
            if info.is_master and not info.failed and info.owns(slot):
                return self.node(info.port)
        raise ClusterError(f"no healthy master serves slot {slot}")

    # -- faults --------------------------------------------------------------------------

    def kill_master_of(self, key: str | bytes) -> ClusterNode:
        """SIGKILL the master that owns ``key``'s slot; returns the dead node."""
        victim = self.master_of(key)
        info = next(i for i in self.topology() if i.port == victim.port)
        self._slots_of_killed[victim.port] = info.slots
        victim.kill()
        return victim

    def wait_failover(self, killed: ClusterNode, timeout_s: float = 20.0) -> ClusterNode:
        """Wait until a replica of ``killed`` serves its slots and the cluster is ok again.

        Returns the promoted node. Raises ``ClusterError`` on timeout.
        """
        slot = self._slots_of_killed[killed.port][0][0]
        deadline = time.monotonic() + timeout_s
        promoted: list[int] = []

        def converged() -> bool:
            views = [node.query("CLUSTER", "NODES") for node in self.nodes if node.alive]
            if any(view is None for view in views):
                return False
            port = failover_done([parse_cluster_nodes(v) for v in views if v is not None], slot, killed.port)
            if port is None or not self._all_ok():
                return False
            promoted.append(port)
            return True

        self._wait(converged, deadline, f"failover of {killed.port}")
        return self.node(promoted[-1])

    def restart(self, node: ClusterNode, timeout_s: float = 20.0) -> None:
        """Start a killed node again on its port and ``nodes.conf``: it rejoins as a replica."""
        node.start()
        deadline = time.monotonic() + timeout_s
        self._wait(partial(_answers, node), deadline, f"restart of {node.port}")
        if self._slots_of_killed.pop(node.port, None) is not None:
            # it wakes up believing it is still master; wait until it learns it was replaced
            self._wait(lambda: self._role(node) == "slave", deadline, f"{node.port} to rejoin as replica")
        self.wait_ok(timeout_s=max(deadline - time.monotonic(), 1.0))

    @staticmethod
    def _role(node: ClusterNode) -> object:
        info = node.replication_info()
        return None if info is None else info.get("role")

    # -- convergence ---------------------------------------------------------------------

    def wait_replicated(self, timeout_s: float = 10.0) -> None:
        """Wait until every live replica has applied everything its master wrote so far.

        Replication is asynchronous: call this before killing a master when the test expects
        the writes made so far to survive the failover.
        """

        def caught_up() -> bool:
            for node in self.nodes:
                info = node.replication_info() if node.alive else None
                if info is None or info.get("role") != "master":
                    continue
                offset = int(str(info.get("master_repl_offset", 0)))
                for name, value in info.items():
                    # slaveN: {"ip": ..., "port": ..., "offset": ...} (redis-py parses the line)
                    lagging = isinstance(value, dict) and int(value.get("offset", -1)) < offset
                    if name.startswith("slave") and lagging:
                        return False
            return True

        self._wait(caught_up, time.monotonic() + timeout_s, "replicas to catch up")

    def wait_ok(self, timeout_s: float = 20.0) -> None:
        """Wait until every live node says ``cluster_state:ok`` and every replica is in sync."""
        self._wait(lambda: self._all_ok() and self._replicas_linked(), time.monotonic() + timeout_s, "ok")

    def _all_ok(self) -> bool:
        live = [node for node in self.nodes if node.alive]
        live_ports = {node.port for node in live}
        for node in live:
            text = node.query("CLUSTER", "INFO")
            nodes_text = node.query("CLUSTER", "NODES")
            if text is None or nodes_text is None:
                return False
            info = parse_cluster_info(text)
            if info.get("cluster_state") != "ok" or int(info.get("cluster_known_nodes", 0)) < len(live):
                return False
            # every node must see every live node as healthy (a restarted one is flagged until
            # the others hear from it again)
            if any(i.failed for i in parse_cluster_nodes(nodes_text) if i.port in live_ports):
                return False
        return True

    def _replicas_linked(self) -> bool:
        for node in self.nodes:
            info = node.replication_info() if node.alive else None
            if info is None:
                return False
            if info.get("role") == "slave" and info.get("master_link_status") != "up":
                return False
        return True

    @staticmethod
    def _wait(check: Callable[[], bool], deadline: float, what: str) -> None:
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(POLL_S)
        raise ClusterError(f"cluster: timed out waiting for {what}")


@contextmanager
def running_cluster(masters: int = 3, replicas: int = 0) -> Iterator[RedisCluster]:
    """A started cluster that is always stopped and removed afterwards."""
    cluster = RedisCluster(masters, replicas)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
