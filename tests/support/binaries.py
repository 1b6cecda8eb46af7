"""Tests that need a real program ask for it here: a missing one skips the test.

Under ``CI`` the skip is a failure (``support.ci_rules``): ``.ci/run`` installs every program
named here (redis-server, redis-cli, promtool), so there a missing one is a broken machine.
"""

from __future__ import annotations

import shutil

import pytest


def require_binaries(*names: str) -> dict[str, str]:
    """Return ``{name: path}``; skip (a failure under ``CI``) when any is missing."""
    found = {name: shutil.which(name) for name in names}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not on PATH (scripts/install-system-packages.sh installs it)")
    return {name: path for name, path in found.items() if path is not None}
