"""Where relayd delivers: the ``Sink`` Protocol, its outcomes and ``resolve_sink``.

A sink takes a ``Batch`` of ``relayd/1`` envelopes (one kind, read a column at a time or
envelope by envelope) and returns one outcome per envelope. Sinks are
found by name through the entry-point group ``relayd.sinks`` (see ``relayd.sinks.registry``
for the factory convention plugin authors follow). The helpers a plugin shares with the
built-in sinks are here too: ``verified_context`` (the one always-verified TLS context) and
``progressed`` (a request of a long ``deliver`` call ended: its deadline starts again).

Each public name is loaded from its module on first use, so the CLI can read the sinks' own
options (``relayd.sinks.families``) without loading the registry and the spec parser.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from relayd.envelope.batch import Batch
    from relayd.observability.inflight import progressed
    from relayd.security.tls import verified_context
    from relayd.sinks.base import DELIVERED, Delivered, Outcome, Permanent, Retry, Sink, SinkOptions
    from relayd.sinks.registry import known_sinks, resolve_sink
    from relayd.sinks.spec import SinkSpec, parse_sink_spec

#: Each public name and the module that defines it.
_HOMES: dict[str, str] = {
    "DELIVERED": "relayd.sinks.base",
    "Batch": "relayd.envelope.batch",
    "Delivered": "relayd.sinks.base",
    "Outcome": "relayd.sinks.base",
    "Permanent": "relayd.sinks.base",
    "Retry": "relayd.sinks.base",
    "Sink": "relayd.sinks.base",
    "SinkOptions": "relayd.sinks.base",
    "SinkSpec": "relayd.sinks.spec",
    "known_sinks": "relayd.sinks.registry",
    "parse_sink_spec": "relayd.sinks.spec",
    "progressed": "relayd.observability.inflight",
    "resolve_sink": "relayd.sinks.registry",
    "verified_context": "relayd.security.tls",
}

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
    "progressed",
    "resolve_sink",
    "verified_context",
]


def __getattr__(name: str) -> _typing.Any:
    """Load a public name from its module on first use (PEP 562), then keep it here."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'relayd.sinks' has no attribute {name!r}")
    value = getattr(_importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
