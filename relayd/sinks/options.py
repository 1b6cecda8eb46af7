"""The options every sink shares, declared here (``relayd.options``): which sinks, what they send.

``Settings.sink_specs`` reads the sinks, ``SinkOptions`` the format (``relayd.sinks.base``,
``relayd.sinks.cloudevents``). Light on purpose: the CLI imports it for its flags.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from relayd.options import option


@dataclass(frozen=True, slots=True)
class SinkChoice:
    """The sink of each kind of entry."""

    # No default sink: relaying into the log by accident acks the backlog (``--sink log`` asks for it).
    sink: str | None = option(None, "Sink for every kind not given its own: log, jsonl:PATH, ...")
    outbox_sink: str | None = option(None, "Sink for outbox events (default: --sink).")
    spawn_sink: str | None = option(None, "Sink for spawn intents (default: --sink).")
    timer_sink: str | None = option(None, "Sink for due timers (default: --sink).")


@dataclass(frozen=True, slots=True)
class FormatOptions:
    """What every sink sends: the relayd/1 envelope or CloudEvents, and how."""

    format: Literal["relayd", "cloudevents"] = option(
        "relayd", "What every sink sends: relayd (the relayd/1 envelope) or cloudevents (CloudEvents 1.0)."
    )
    cloudevents_mode: Literal["binary", "structured"] = option(
        "binary",
        "CloudEvents content mode where the transport has headers (webhook, kafka, nats, amqp): "
        "binary or structured.",
    )
    cloudevents_source: str = option(
        "relayd://{prefix}", "CloudEvents 'source' URI; '{prefix}' is filled in per prefix."
    )
