"""The dependency rules between packages, checked on the import statements of every module."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Modules that decide (data and ``now`` in, data out): no Redis, no logging, no clock.
PURE_MODULES = [
    "relayd/engine/plan.py",
    "relayd/sinks/request_chunks.py",
    "relayd/engine/backoff.py",
    "relayd/engine/ordering.py",
    "relayd/engine/shares.py",
    "relayd/engine/notify.py",
    "relayd/engine/breaker.py",
    "relayd/engine/rate.py",
    "relayd/engine/fresh.py",
    "relayd/engine/build.py",
    "relayd/engine/judge.py",
    "relayd/envelope/batch.py",
    "relayd/envelope/__init__.py",
    "relayd/envelope/outbox_json.py",
    "relayd/envelope/outbox.py",
    "relayd/envelope/outbox_window.py",
    "relayd/envelope/decode.py",
    "relayd/envelope/faults.py",
    "relayd/envelope/stored.py",
    "relayd/envelope/trace.py",
    "relayd/observability/health.py",
    "relayd/sinks/spec.py",
    "relayd/sinks/target_rules.py",
    "relayd/sinks/amqp/target.py",
    "relayd/sinks/aws/target.py",
    "relayd/sinks/gcp/target.py",
    "relayd/sinks/harel/target.py",
    "relayd/sinks/kafka/target.py",
    "relayd/sinks/nats/target.py",
    "relayd/sinks/redis_stream/target.py",
    "relayd/sinks/webhook/target.py",
    "relayd/sinks/webhook/http_policy.py",
    "relayd/sinks/webhook/proxy.py",
    "relayd/sinks/harel/wire.py",
    "relayd/sinks/kafka/config.py",
    "relayd/sinks/cloudevents/__init__.py",
    "relayd/sinks/cloudevents/envelope.py",
    "relayd/sinks/cloudevents/bindings.py",
    "relayd/sinks/cloudevents/window.py",
    "relayd/sinks/webhook/standard_webhooks.py",
    "relayd/config/redis_url.py",
    "store/urls.py",
    "store/plans.py",
    "store/backlog.py",
    "store/codec.py",
    "store/keys.py",
    "relayd/console/signatures.py",
    "relayd/console/filters.py",
    "relayd/console/paging.py",
    "relayd/console/groups.py",
    "relayd/console/rates.py",
    "relayd/console/commands.py",
    "relayd/console/display.py",
]
IMPURE_IMPORTS = ("redis", "structlog", "time", "asyncio", "httpx", "aiohttp")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _top(name: str) -> str:
    return name.partition(".")[0]


@pytest.mark.parametrize("path", sorted((ROOT / "store").rglob("*.py")), ids=lambda p: p.name)
def test_store_never_imports_relayd(path: Path) -> None:
    """The store is the engine's library: it must not depend on the daemon."""
    assert {n for n in _imports(path) if _top(n) == "relayd"} == set()


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_modules_import_no_io(module: str) -> None:
    """Pure modules take data and time as parameters; I/O and clocks live in the shells."""
    imported = {_top(n) for n in _imports(ROOT / module)}

    assert imported & set(IMPURE_IMPORTS) == set()


def test_nothing_imports_the_cli() -> None:
    """The CLI is the outermost shell: only itself and ``__main__`` may import it."""
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "relayd").rglob("*.py")
        if "cli" not in path.relative_to(ROOT / "relayd").parts
        and path.name != "__main__.py"
        and any(n.startswith("relayd.cli") for n in _imports(path))
    ]

    assert offenders == []


#: Most modules ``relayd/`` may hold at its root (``__init__`` and ``__main__`` aside).
MAX_ROOT_MODULES = 12


def test_the_package_root_holds_few_modules() -> None:
    """A module lives in the package of its concept (docs/internals.md#layout); the root keeps
    only what every package shares."""
    package_files = {"__init__.py", "__main__.py"}
    root = sorted(p.name for p in (ROOT / "relayd").glob("*.py") if p.name not in package_files)

    assert len(root) <= MAX_ROOT_MODULES, root


#: Packages only the CLI (and each other) may import: what one command uses, nothing else loads.
COMMAND_PACKAGES = ("relayd.bench", "relayd.demo")


def test_only_the_cli_and_each_other_import_the_bench_and_the_demo() -> None:
    """The engine, state, sinks and runtime never depend on ``relayd bench`` or ``relayd demo``."""
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "relayd").rglob("*.py")
        if path.relative_to(ROOT / "relayd").parts[0] not in {"cli", "bench", "demo"}
        and any(n.startswith(COMMAND_PACKAGES) for n in _imports(path))
    ]

    assert offenders == []


def test_the_runtime_tweaks_import_nothing_of_relayd_or_store() -> None:
    """``relayd.runtime`` adjusts libraries; it must not pull the engine in with it."""
    offenders = {
        path.name: sorted(n for n in _imports(path) if _top(n) in {"relayd", "store"})
        for path in (ROOT / "relayd" / "runtime").glob("*.py")
    }

    assert {name: found for name, found in offenders.items() if found} == {}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_level_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements at module level: the body, into ``if`` (``if TYPE_CHECKING`` too) and ``try``."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _module_level_statements(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            yield from _module_level_statements(
                node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body]
            )


def _module_imports(path: Path, known: set[str]) -> set[str]:
    """The project modules ``path`` imports at module level, type-only imports included (each
    with its parent packages): a cycle of annotations is a cycle of concepts all the same."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in _module_level_statements(tree.body):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    found: set[str] = set()
    for name in names:
        parts = name.split(".")
        found.update(m for i in range(1, len(parts) + 1) if (m := ".".join(parts[:i])) in known)
    return found


def _ancestors(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _project_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports at module level; its own packages aside."""
    paths = {_module_name(p): p for top in ("relayd", "store") for p in (ROOT / top).rglob("*.py")}
    return {
        name: _module_imports(path, set(paths)) - {name} - _ancestors(name) for name, path in paths.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_in_relayd_or_store() -> None:
    """Module-level imports form no cycle, ``if TYPE_CHECKING`` ones included (imports inside
    functions aside: a command loads what it needs when it runs)."""
    graph = _project_graph()

    assert "relayd.engine.sweeper" in graph["relayd.engine.prefix_relay"]  # the graph is real
    assert "store.async_redis_store" in graph["store"]  # an ``if TYPE_CHECKING`` import is an edge
    assert _cycles(graph) == []


def test_type_only_imports_are_edges_and_imports_in_functions_are_not(tmp_path: Path) -> None:
    """``if TYPE_CHECKING`` imports count toward a cycle; an import a function runs does not."""
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from relayd.envelope.batch import Batch\n"
        "\n\ndef later() -> None:\n    import relayd.envelope.decode\n"
    )
    known = {"relayd", "relayd.envelope", "relayd.envelope.batch", "relayd.envelope.decode"}

    assert _module_imports(module, known) == {"relayd", "relayd.envelope", "relayd.envelope.batch"}


def test_the_cycle_finder_finds_a_cycle() -> None:
    """A two-module and a three-module cycle are both reported; a chain is not."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}

    assert _cycles(graph) == [["a", "b"], ["c", "d", "e"]]


def test_the_cli_loads_no_command_s_dependencies_until_a_command_runs() -> None:
    """``relayd --help`` imports the CLI (Typer) only: no bench, demo, engine, redis, pydantic or rich
    (their options' declarations aside)."""
    heavy = (
        "relayd.bench",
        "relayd.demo",
        "relayd.engine",
        "relayd.config.settings",
        "redis",
        "pydantic",
        "pydantic_settings",
        "structlog",
        "rich",
        "typer.rich_utils",
    )
    heavy_packages = tuple(f"{name}." for name in heavy)  # rich.console, not only rich
    code = "import sys, relayd.cli.app; print(' '.join(sorted(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    # The engine's and the bench's options are declared beside them (relayd.engine.options,
    # relayd.bench.options): the CLI builds their flags from those modules alone, which import
    # nothing else of the engine or the bench.
    declaring = {"relayd.engine", "relayd.engine.options", "relayd.bench", "relayd.bench.options"}
    found = {m for m in loaded.stdout.split() if m in heavy or m.startswith(heavy_packages)}
    assert sorted(found - declaring) == []


@pytest.mark.parametrize("args", [["--help"], ["--version"]], ids=" ".join)
def test_the_root_help_and_version_load_neither_pydantic_nor_settings(args: list[str]) -> None:
    """Typer loads pydantic to convert a command's options: ``relayd --help`` converts none."""
    code = (
        "import sys\nfrom relayd.cli.app import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n"
        "    pass\nprint('MODULES', ' '.join(sorted(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)

    (line,) = [line for line in done.stdout.splitlines() if line.startswith("MODULES ")]
    loaded = set(line.split()[1:])
    assert "typer" in loaded
    assert {"pydantic", "pydantic_settings", "relayd.config.settings", "redis"} & loaded == set()
