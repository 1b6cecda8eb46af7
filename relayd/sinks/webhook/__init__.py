"""The webhook sink: ``webhook:URL``, one HTTP POST per envelope or per batch (docs/sinks.md)."""

from relayd.sinks.lazy_sink import sink_classes

__getattr__ = sink_classes(__name__, "WebhookSink")
