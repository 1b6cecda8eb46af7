"""The pubsub sink: Google Cloud Pub/Sub topics (docs/pubsub.md)."""

from relayd.sinks.lazy_sink import sink_classes

__getattr__ = sink_classes(__name__, "PubSubSink")
