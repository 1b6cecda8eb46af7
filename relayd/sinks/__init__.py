"""Where relayd delivers: the ``Sink`` Protocol, its outcomes and ``resolve_sink``.

A sink takes a ``Batch`` of ``relayd/1`` envelopes (one kind, read a column at a time or
envelope by envelope) and returns one outcome per envelope. Sinks are
found by name through the entry-point group ``relayd.sinks`` (see ``relayd.sinks.registry``
for the factory convention plugin authors follow).
"""

from __future__ import annotations

from relayd.batch import Batch
from relayd.sinks.base import DELIVERED, Delivered, Outcome, Permanent, Retry, Sink, SinkOptions
from relayd.sinks.registry import known_sinks, resolve_sink
from relayd.sinks.spec import SinkSpec, parse_sink_spec

__all__ = [
    "DELIVERED",
    "Batch",
    "Delivered",
    "Outcome",
    "Permanent",
    "Retry",
    "Sink",
    "SinkOptions",
    "SinkSpec",
    "known_sinks",
    "parse_sink_spec",
    "resolve_sink",
]
