"""relayd: the daemon that drains a durable statechart engine's outbox, spawns and timers.

``__version__`` is the one place the version is written: hatch reads it for the package
metadata (``[tool.hatch.version]`` in ``pyproject.toml``).
"""

__version__ = "0.1.0"
