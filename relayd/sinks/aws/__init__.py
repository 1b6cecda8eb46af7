"""The sqs, sns and kinesis sinks: one AWS client, three destinations (docs/aws.md).

The package's own import stays light: the sink and its client library are in ``sink``, loaded
when the sink is resolved, so reading this family's options never loads its client.
"""

from __future__ import annotations

import importlib
from typing import Any, Final

#: The sink classes by name, as ``relayd.sinks.aws:<Class>`` named them before the package
#: (entry points an older install recorded still resolve).
_SINKS: Final = {
    "SqsSink": "relayd.sinks.aws.sink",
    "SnsSink": "relayd.sinks.aws.sink",
    "KinesisSink": "relayd.sinks.aws.sink",
}


def __getattr__(name: str) -> Any:
    """Load a sink class of ``_SINKS`` on first use; anything else is not here."""
    if name in _SINKS:
        return getattr(importlib.import_module(_SINKS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
