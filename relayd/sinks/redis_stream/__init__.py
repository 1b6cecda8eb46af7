"""The redis-stream sink: XADD each envelope to a stream of another Redis (docs/sinks.md)."""

from relayd.sinks.lazy_sink import sink_classes

__getattr__ = sink_classes(__name__, "RedisStreamSink")
