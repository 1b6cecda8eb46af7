"""relayd: the daemon that drains a durable statechart engine's outbox, spawns and timers."""

__version__ = "0.1.0"
