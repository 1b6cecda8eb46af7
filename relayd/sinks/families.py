"""The built-in sink families whose own options are command-line flags (``relayd.sinks.own_options``).

The CLI builds a flag per option of each class here, in this order; ``Settings`` loads them.
Only the small options modules are imported, never a sink or its client library.
"""

from __future__ import annotations

from typing import Final

from relayd.sinks.amqp.options import AmqpOptions
from relayd.sinks.kafka.options import KafkaOptions
from relayd.sinks.nats.options import NatsOptions
from relayd.sinks.webhook.options import WebhookOptions

#: The options classes of the built-in sinks, in the order their flags are shown.
BUILT_IN_OPTIONS: Final[tuple[type, ...]] = (WebhookOptions, AmqpOptions, KafkaOptions, NatsOptions)
