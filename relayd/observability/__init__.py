"""What relayd tells its operators while it runs: metrics, logs, probes, events and spans.

- ``metrics``: every Prometheus metric of docs/metrics.md.
- ``logs``: structlog configured for the process, secrets redacted.
- ``health``: liveness and readiness, a snapshot and a pure verdict for each probe.
- ``heartbeat``: the event loop's heartbeat, the loop half of liveness.
- ``inflight``: sink calls in flight with their deadlines, the delivery half of liveness.
- ``http``: the ``/metrics``, ``/healthz`` and ``/readyz`` endpoints.
- ``events``: the operational events (``--events-sink``), one CloudEvent each.
- ``tracing``: relayd's own spans, one per sink call, exported with OTLP when asked.

Importing this package loads none of them.
"""
