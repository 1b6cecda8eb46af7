"""The core options' classes (``relayd.options``), each declared beside the code that reads it.

``Settings`` has a field per option of these classes, in this order, after which come the
options still declared in ``relayd.config.settings``; the CLI builds their flags from the same
classes. A new class of options is one line here. Only the small declaring modules are imported.
"""

from __future__ import annotations

from typing import Final

from relayd.engine.options import PacingOptions, TuningOptions

#: The core options' classes, in the order ``Settings`` declares their fields.
CORE_OPTIONS: Final[tuple[type, ...]] = (TuningOptions, PacingOptions)
