"""The nats sink: publish each envelope to a NATS or JetStream subject (docs/brokers.md)."""

from relayd.sinks.lazy_sink import sink_classes

__getattr__ = sink_classes(__name__, "NatsSink")
