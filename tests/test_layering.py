"""The dependency rules of STYLE §3, checked on the import statements of every module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Modules that decide (data and ``now`` in, data out): no Redis, no logging, no clock.
PURE_MODULES = [
    "relayd/engine/plan.py",
    "relayd/engine/backoff.py",
    "relayd/engine/ordering.py",
    "relayd/engine/shares.py",
    "relayd/engine/notify.py",
    "relayd/batch.py",
    "relayd/envelope.py",
    "relayd/health.py",
    "relayd/sinks/spec.py",
    "relayd/sinks/http_policy.py",
    "store/plans.py",
    "store/backlog.py",
    "store/codec.py",
    "store/keys.py",
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
