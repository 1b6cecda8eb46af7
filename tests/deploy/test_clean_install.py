"""The built wheel works on its own: installed into a new virtual environment without the dev or
test extras, ``relayd --help``, ``relayd demo`` and ``relayd sweep --once`` succeed.

This is the test that fails when a runtime dependency is missing from ``pyproject.toml``: the
development environment has every extra installed, so an import of a package only the dev env
has goes unnoticed everywhere else. The venv is built from the interpreter alone (no
``--system-site-packages``) and its dependencies come from the package index as pip is
configured on this machine, through pip's usual cache.

Real Redis only: ``relayd sweep`` runs as a subprocess of the venv's interpreter and cannot reach
fakeredis's in-process server.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
import tomllib
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from store import Event, Execution, RedisStore, TimerOp

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("outbox", "spawn", "timer")

#: Upper bound for building the wheel and for ``pip install`` (seconds): generous, because a
#: cold pip cache resolves every dependency from the index.
INSTALL_TIMEOUT_S = 300.0
#: Upper bound for one ``relayd`` command in the venv (seconds); the demo itself runs 3 s.
COMMAND_TIMEOUT_S = 90.0

#: Walks the installed ``relayd`` and ``store`` packages, imports every module and prints JSON:
#: where each package was imported from, and every module whose import raised (with the missing
#: module's name for an ImportError).
#: ``__main__`` modules are skipped: importing one runs the CLI.
IMPORT_EVERY_MODULE = textwrap.dedent(
    """
    import importlib, json, pkgutil
    origins, failures = {}, {}
    def attempt(name):
        try:
            return importlib.import_module(name)
        except Exception as exc:
            missing = exc.name if isinstance(exc, ImportError) else None
            failures[name] = {"missing": missing, "error": f"{type(exc).__name__}: {exc}"}
            return None
    for top in ("relayd", "store"):
        package = attempt(top)
        if package is None:
            continue
        origins[top] = package.__file__
        for info in pkgutil.walk_packages(package.__path__, top + "."):
            if info.name.rpartition(".")[2] != "__main__":
                attempt(info.name)
    print(json.dumps({"origins": origins, "failures": failures}))
    """
)


def clean_env() -> dict[str, str]:
    """The caller's environment without anything that would leak the dev env into the venv.

    ``PYTHON*`` (``PYTHONPATH`` above all) and ``VIRTUAL_ENV`` could put the repo or the dev
    site-packages on the venv's path; ``RELAYD_*`` would change the commands' options. ``PIP_*``
    stays: it is how pip is configured on this machine. Wide, colourless output, so rich never
    wraps or truncates the names the assertions look for.
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "RELAYD_")) and key != "VIRTUAL_ENV"
    }
    return env | {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}


def run(argv: Sequence[str | Path], *, cwd: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in ``cwd`` with the clean environment; capture text output, never raise on exit."""
    return subprocess.run(
        [str(arg) for arg in argv],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout_s,
    )


def explain(step: str, result: subprocess.CompletedProcess[str]) -> str:
    """The failure message of one step: its exit code and the tail of both streams."""
    return (
        f"{step} exited with {result.returncode}\n"
        f"--- stdout (tail) ---\n{result.stdout[-4000:]}\n"
        f"--- stderr (tail) ---\n{result.stderr[-4000:]}"
    )


def optional_import_names() -> set[str]:
    """Top-level names of the optional runtime extras (``harel``): their absence is allowed.

    The distribution name is taken as the import name, which holds for every extra we ship.
    """
    extras: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    names = set()
    for extra, requirements in extras.items():
        if extra in {"test", "dev"}:
            continue
        for requirement in requirements:
            match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
            assert match is not None, requirement
            names.add(match.group().lower().replace("-", "_"))
    return names


def seed_backlog(store: RedisStore[Any, Any], *, now_s: float) -> set[tuple[str, str]]:
    """Commit a small backlog of every kind through ``store``; return its ``(kind, id)`` pairs.

    Three executions, each committing two outbox events (one targeted, one untargeted), one
    spawn intent and one timer already due. The ids follow docs/internals.md#key-space: ``P:outbox:{seq}``,
    ``P:spawn:{seq}``, and the timer event id ``timeout:{execution_id}:{path}:{fire_at}``.
    """
    for n in range(3):
        exe = Execution(id=f"clean-install-{n}", definition_id="clean-install")
        emits = [(f"target-{n}", Event(kind="Ping", data={"n": n})), (None, Event(kind="Pong"))]
        # Whole seconds plus a binary fraction: exact in Redis's double and in str(float).
        fire_at = float(int(now_s)) - 30.0 + n + 0.25
        timers = [TimerOp(action="schedule", path="root.waiting", fire_at=fire_at)]
        spawns = [(f"clean-install-{n}.child", "root.fork", {"n": n})]
        store.commit(exe, emits, f"evt-{n}", timers=timers, spawns=spawns)

    prefix = store.prefix
    expected = {("outbox", f"{prefix}:outbox:{e.seq}") for e in store.pending_outbox()}
    expected |= {("spawn", f"{prefix}:spawn:{s.seq}") for s in store.pending_spawns()}
    expected |= {
        ("timer", f"timeout:{exe_id}:{path}:{fire_at}") for exe_id, path, fire_at in store.due_timers(now_s)
    }
    counts = {kind: sum(1 for k, _ in expected if k == kind) for kind in KINDS}
    assert counts == {"outbox": 6, "spawn": 3, "timer": 3}, (
        f"the seeded backlog is not what was committed: {counts}"
    )
    return expected


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_wheel_installed_in_a_clean_venv_runs_help_demo_and_sweep_once(
    tmp_path: Path, redis_server: Any
) -> None:
    """Build the wheel, install it alone into a new venv, and run the three commands from it."""
    dist = tmp_path / "dist"
    built = run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", dist, ROOT],
        cwd=tmp_path,
        timeout_s=INSTALL_TIMEOUT_S,
    )
    assert built.returncode == 0, explain("python -m build --wheel", built)
    wheels = sorted(dist.glob("relayd-*.whl"))
    assert len(wheels) == 1, f"expected one relayd wheel in {dist}, found {wheels}"

    venv = tmp_path / "venv"
    created = run([sys.executable, "-m", "venv", venv], cwd=tmp_path, timeout_s=120.0)
    assert created.returncode == 0, explain("python -m venv", created)
    python, relayd = venv / "bin" / "python", venv / "bin" / "relayd"
    # No --no-cache-dir: pip's cache keeps the resolution fast on a second run.
    installed = run([python, "-m", "pip", "install", wheels[0]], cwd=tmp_path, timeout_s=INSTALL_TIMEOUT_S)
    assert installed.returncode == 0, explain("pip install <wheel>", installed)
    checked = run([python, "-m", "pip", "check"], cwd=tmp_path, timeout_s=120.0)
    assert checked.returncode == 0, explain("pip check", checked)

    # Every shipped module imports from the venv alone (a command not run below is covered too).
    imported = run([python, "-c", IMPORT_EVERY_MODULE], cwd=tmp_path, timeout_s=COMMAND_TIMEOUT_S)
    assert imported.returncode == 0, explain("importing every module", imported)
    report = json.loads(imported.stdout.strip().splitlines()[-1])
    allowed = optional_import_names()
    broken = {
        module: failure["error"]
        for module, failure in report["failures"].items()
        if (failure["missing"] or "").partition(".")[0] not in allowed
    }
    assert broken == {}, f"modules of the wheel that do not import in a clean venv: {broken}"
    assert set(report["origins"]) == {"relayd", "store"}
    for top, origin in report["origins"].items():
        assert Path(origin).is_relative_to(venv), f"{top} was imported from {origin}, not from the venv"

    helped = run([relayd, "--help"], cwd=tmp_path, timeout_s=COMMAND_TIMEOUT_S)
    assert helped.returncode == 0, explain("relayd --help", helped)
    for command in ("sweep", "status", "dlq", "demo"):
        assert re.search(rf"\b{command}\b", helped.stdout), f"relayd --help does not list {command!r}"

    demo = run([relayd, "demo", "--duration", "3"], cwd=tmp_path, timeout_s=COMMAND_TIMEOUT_S)
    assert demo.returncode == 0, explain("relayd demo --duration 3", demo)
    unnamed = [kind for kind in KINDS if not re.search(rf"\b{kind}\b", demo.stdout)]
    assert unnamed == [], explain(f"relayd demo's output does not name {unnamed}", demo)

    prefix = "clean" + uuid.uuid4().hex[:10]
    with redis_server.client() as client:
        store: RedisStore[Any, Any] = RedisStore(client, prefix=prefix)
        expected = seed_backlog(store, now_s=time.time())
        sink_path = tmp_path / "delivered.jsonl"
        argv = [relayd, "sweep", "--once", "--redis-url", redis_server.url, "--prefix", prefix]
        swept = run([*argv, "--sink", f"jsonl:{sink_path}"], cwd=tmp_path, timeout_s=COMMAND_TIMEOUT_S)

        assert swept.returncode == 0, explain("relayd sweep --once", swept)
        envelopes = [json.loads(line) for line in sink_path.read_text().splitlines()]
        assert {e["v"] for e in envelopes} == {"relayd/1"}
        assert {e["prefix"] for e in envelopes} == {prefix}
        delivered = {(e["kind"], e["id"]) for e in envelopes}
        assert delivered == expected, f"missing: {expected - delivered}; unexpected: {delivered - expected}"
        # Exit 0 means every entry was acked: the live structures are empty.
        left = (store.pending_outbox(), store.pending_spawns(), store.due_timers(time.time()))
        assert left == ([], [], [])
