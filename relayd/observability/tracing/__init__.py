"""relayd's own spans: one per sink call, exported with OTLP when the standard OTEL_* variables
ask for it (docs/tracing.md). ``config`` decides from the environment, ``setup`` builds the
OpenTelemetry SDK pipeline (the ``otel`` extra), ``sink_span`` wraps a sink call in a span."""
