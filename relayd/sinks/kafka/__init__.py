"""The kafka sink: produce each envelope to a Kafka topic (docs/brokers.md)."""

from relayd.sinks.lazy_sink import sink_classes

__getattr__ = sink_classes(__name__, "KafkaSink")
