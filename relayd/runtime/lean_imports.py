"""Import structlog without rich, so a command does not load rich's tracebacks at start-up.

structlog imports rich's traceback and pretty-printing modules (and pygments, through them) at
import time whenever rich is installed, only to offer a console exception formatter. relayd
renders exceptions plainly (a traceback with locals could print a secret; ``relayd.observability.logs`` names
``plain_traceback``), so that import is pure start-up cost, larger than all the rest of what
``relayd --help`` loads (``tests/benchmarks/bench_startup.py``). rich stays importable: only
structlog's own import is made without it, and commands that draw tables import rich themselves.
"""

from __future__ import annotations

import importlib
import sys


def import_structlog_without_rich() -> None:
    """Import structlog while ``rich`` reads as not installed; a no-op once either is loaded."""
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # None makes "import rich" fail
    try:
        importlib.import_module("structlog")
    finally:
        del sys.modules["rich"]
