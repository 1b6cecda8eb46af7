"""Create a spawned child with harel's own code, as harel's relay inside its worker does.

A spawn becomes a child Execution the way harel 0.9's transport relay makes it
(``TransportDriverLogic._create_spawn_flow``, run by the logic ``WorkerLogic`` builds for the
parent): an invoked machine's context gets its schema's defaults, the child inherits the
parent's priority, and its start runs at once (its entry actions, its timers, its emits, one
commit), skipped when the child exists already. The machine definitions are loaded as harel's
worker loads them (``harel.worker.load_definitions``: every machine of every ``*.stm`` in a
directory, validated), so the sink needs the directory harel's workers have in
``HAREL_DEFINITIONS_DIR``, and the application's actions importable, as a worker does.

harel is imported here only (the ``harel`` extra), and only when the sink has definitions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from relayd.errors import ConfigError
from relayd.extras import import_extra


class HarelSpawner:
    """harel's child creation over one Redis: the definitions, and a harel store per prefix."""

    def __init__(self, definitions_dir: str) -> None:
        """Load and validate every machine under ``definitions_dir``.

        Raises:
            ConfigError: harel is not installed, the directory is missing or holds no machine,
                or a machine is invalid (named, as harel's worker names it).
        """
        worker, hosting, flow, store_module, transport_module = import_extra(
            "harel",
            "harel",
            "harel.worker",
            "harel.engine.hosting",
            "harel.engine.flow",
            "harel.engine.aio_store",
            "harel.engine.aio_transport",
            needs="harel (the harel extra) to create children from machine definitions",
        )
        if not Path(definitions_dir).is_dir():
            raise ConfigError(f"sink 'harel': definitions={definitions_dir!r} is not a directory")
        try:
            definitions = worker.load_definitions(definitions_dir)
        except (RuntimeError, OSError) as exc:
            raise ConfigError(f"sink 'harel': {' '.join(str(exc).split())}") from None
        if not definitions:
            raise ConfigError(f"sink 'harel': no machine in {definitions_dir!r} (*.stm files)")
        # The worker's own logic: its registry (inline submachines folded in) and resolver.
        self._worker = hosting.WorkerLogic(definitions)
        self._run_async = flow.run_async
        self._store_class = store_module.AsyncRedisStore
        self._transport_class = transport_module.AsyncRedisTransport
        self._spawn_entry = _spawn_entry_class()
        self._conflict: type[Exception] = _store_conflict()
        self._unresolved: type[Exception] = _resolve_error()
        self._ports: dict[str, dict[str, Any]] = {}

    @property
    def machines(self) -> list[str]:
        """The definition ids loaded (inline submachines included)."""
        return sorted(self._worker.definitions)

    def _ports_for(self, client: Any, prefix: str) -> dict[str, Any]:
        if prefix not in self._ports:
            self._ports[prefix] = {
                "store": self._store_class(client, prefix=prefix),
                "transport": self._transport_class(client, prefix=prefix),
            }
        return self._ports[prefix]

    async def create(self, client: Any, prefix: str, body: dict[str, object], seq: int) -> str | None:
        """Create the child of spawn ``body`` as harel's relay does; None, or why it cannot be.

        A child created meanwhile by harel itself (a commit conflict) counts as created.

        Raises:
            KeyError, TypeError, ValueError: the spawn is malformed or names an unknown machine.
        """
        ports = self._ports_for(client, prefix)
        parent_id = body["parent_id"]
        parent = await ports["store"].load(str(parent_id)) if parent_id is not None else None
        if parent is None:
            return "harel spawn: parent execution not found"
        context = body["context"]
        if not isinstance(context, dict):
            raise TypeError("context is not an object")
        entry = self._spawn_entry(
            seq=seq,
            parent_id=str(parent_id),
            child_id=str(body["child_id"]),
            root_path=str(body["root_path"]),
            context=context,
        )
        logic = self._worker._transport_logic(parent)  # the logic harel's worker relays with
        try:
            await self._run_async(logic._create_spawn_flow(entry), ports)
        except self._conflict:
            return None  # created concurrently (by harel's relay): its progress is kept
        except self._unresolved as exc:
            raise ValueError(str(exc)) from None  # an invoked machine no definition names
        return None


def _spawn_entry_class() -> Any:
    from harel.engine.store import SpawnEntry

    return SpawnEntry


def _store_conflict() -> type[Exception]:
    from harel.engine.store import StoreConflict

    conflict: type[Exception] = StoreConflict
    return conflict


def _resolve_error() -> type[Exception]:
    from harel.engine.resolve import ResolveError

    error: type[Exception] = ResolveError
    return error
