"""The harel sink: publish into harel's own Redis transport (docs/harel.md)."""

from relayd.sinks.lazy_sink import sink_classes

__getattr__ = sink_classes(__name__, "HarelSink")
