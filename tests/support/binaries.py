"""The one rule for tests that need a real program: skip locally when it is missing, fail in CI.

``.ci/run`` installs every program named here (redis-server, redis-cli, promtool), so under
``CI`` a missing one is a broken machine, never a reason to skip (dramatiq's rule).
"""

from __future__ import annotations

import os
import shutil

import pytest


def require_binaries(*names: str) -> dict[str, str]:
    """Return ``{name: path}``; skip when any is missing, or fail when ``CI`` is set."""
    found = {name: shutil.which(name) for name in names}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        message = f"{', '.join(missing)} not on PATH"
        if os.environ.get("CI"):
            pytest.fail(f"{message}: required in CI (.ci/run installs it)")
        pytest.skip(message)
    return {name: path for name, path in found.items() if path is not None}
