"""What the real CLI says of itself, read from its help as a user would see it."""

from __future__ import annotations

import os
import re
import subprocess
import sys


def relayd_env_vars() -> set[str]:
    """Every RELAYD_* variable the real CLI reads, from ``relayd sweep --help``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAYD_")}
    # Wide and colourless, so rich never wraps or styles an env var name.
    env |= {"COLUMNS": "400", "NO_COLOR": "1", "TERM": "dumb"}
    result = subprocess.run(
        [sys.executable, "-m", "relayd", "sweep", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    names = set(re.findall(r"RELAYD_[A-Z0-9_]+", result.stdout))
    assert "RELAYD_REDIS_URL" in names
    return names
