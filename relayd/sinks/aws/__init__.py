"""The sqs, sns and kinesis sinks: one AWS client, three destinations (docs/aws.md)."""

from relayd.sinks.lazy_sink import sink_classes

__getattr__ = sink_classes(__name__, "SqsSink", "SnsSink", "KinesisSink")
