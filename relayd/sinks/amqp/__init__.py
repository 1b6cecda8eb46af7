"""The amqp sink: publish each envelope to a RabbitMQ exchange, confirmed (docs/amqp.md)."""

from relayd.sinks.lazy_sink import sink_classes

__getattr__ = sink_classes(__name__, "AmqpSink")
