"""``start_tracing``: off costs nothing (no tracer installed), on installs relayd's own
provider and its shutdown removes it, and a missing ``otel`` extra is one warning with the
install command (the relay goes on untraced)."""

from __future__ import annotations

import sys

import pytest
from structlog.testing import capture_logs

from relayd.extras import install_command
from relayd.observability.tracing import sink_span
from relayd.observability.tracing.setup import DEFAULT_LINKS, INSTALL_HINT, start_tracing

ASKING = {
    "OTEL_TRACES_EXPORTER": "otlp",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces",
}


def test_without_the_variables_no_tracer_is_installed() -> None:
    with capture_logs() as logs:
        assert start_tracing({}) is None
    assert sink_span._tracer is None
    assert logs == []


@pytest.mark.parametrize(("limit", "links"), [(None, DEFAULT_LINKS), ("5", 5)])
def test_asked_for_a_tracer_is_installed_until_shutdown(
    limit: str | None, links: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = ASKING | ({"OTEL_SPAN_LINK_COUNT_LIMIT": limit} if limit else {})
    if limit:
        monkeypatch.setenv("OTEL_SPAN_LINK_COUNT_LIMIT", limit)  # the SDK reads os.environ itself
    stop = start_tracing(env)
    try:
        assert stop is not None
        assert sink_span._tracer is not None
        assert sink_span._max_links == links
    finally:
        if stop is not None:
            stop()
    assert sink_span._tracer is None


def test_a_missing_extra_is_one_warning_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # an import of it fails

    with capture_logs() as logs:
        assert start_tracing(ASKING) is None

    assert sink_span._tracer is None
    assert logs == [{"event": "tracing_unavailable", "hint": INSTALL_HINT, "log_level": "warning"}]
    assert INSTALL_HINT.endswith(install_command("otel"))


def test_variables_it_cannot_honour_are_one_warning() -> None:
    with capture_logs() as logs:
        assert start_tracing({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) is None
    assert [(log["event"], log["log_level"]) for log in logs] == [("tracing_variables_ignored", "warning")]
