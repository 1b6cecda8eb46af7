"""Which OTEL_* variables turn relayd's span export on, which leave it off, and which are
reported as not honoured (never an exit)."""

from __future__ import annotations

import pytest

from relayd.observability.tracing.config import OFF, TracingChoice, choose

ENDPOINT = "http://127.0.0.1:4318"


@pytest.mark.parametrize(
    ("env", "choice"),
    [
        ({}, OFF),
        ({"OTEL_SERVICE_NAME": "relay"}, OFF),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, TracingChoice(True)),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, TracingChoice(True)),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ENDPOINT + "/v1/traces"}, TracingChoice(True)),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, OFF),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "TRUE"}, OFF),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "false"}, TracingChoice(True)),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
            TracingChoice(True),
        ),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            TracingChoice(False, "OTLP protocol 'grpc': relayd exports http/protobuf only"),
        ),
        (  # the traces-specific variable wins over the general one
            {
                "OTEL_TRACES_EXPORTER": "otlp",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            },
            TracingChoice(True),
        ),
        (
            {"OTEL_TRACES_EXPORTER": "zipkin"},
            TracingChoice(False, "OTEL_TRACES_EXPORTER=zipkin: relayd exports with otlp only"),
        ),
        (
            {"OTEL_TRACES_EXPORTER": "otlp, console"},
            TracingChoice(True, "OTEL_TRACES_EXPORTER: console ignored, otlp only"),
        ),
    ],
)
def test_the_variables_decide(env: dict[str, str], choice: TracingChoice) -> None:
    assert choose(env) == choice
