"""/metrics, /healthz and /readyz over real HTTP on 127.0.0.1."""

from __future__ import annotations

import errno
import time

import httpx
import pytest
from prometheus_client import CollectorRegistry

from relayd.observability.health import Health
from relayd.observability.http import serve_http
from relayd.observability.metrics import RelayMetrics


@pytest.fixture
def served():
    registry = CollectorRegistry()
    metrics = RelayMetrics(registry)
    metrics.add_prefix("stm")
    health = Health(stale_after_s=30)
    handle = serve_http("127.0.0.1", 0, registry, health)
    yield f"http://127.0.0.1:{handle.port}", metrics, health
    handle.close()


def test_metrics_endpoint_serves_prometheus_text(served):
    base, metrics, _ = served
    metrics.delivered.labels("stm", "outbox").inc(7)

    response = httpx.get(f"{base}/metrics")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert 'relayd_delivered_total{kind="outbox",prefix="stm"} 7.0' in response.text


def test_metrics_endpoint_serves_no_created_series(served):
    """A ``_created`` timestamp per series doubles a scrape for nothing anybody graphs."""
    base, metrics, _ = served
    metrics.delivered.labels("stm", "outbox").inc()

    text = httpx.get(f"{base}/metrics").text

    assert "relayd_delivered_total" in text
    assert "_created" not in text


def test_readyz_is_503_with_the_reason_until_redis_answers(served):
    base, _, health = served
    health.watch_sinks({"outbox:log": lambda: True})

    before = httpx.get(f"{base}/readyz")
    health.redis_ok()
    after = httpx.get(f"{base}/readyz")
    health.redis_failed("ConnectionError")
    again = httpx.get(f"{base}/readyz")

    assert (before.status_code, after.status_code, again.status_code) == (503, 200, 503)
    assert again.text.strip() == "redis: ConnectionError"


def test_healthz_turns_503_when_the_loop_stalls(served):
    base, _, health = served

    health.progress(time.monotonic())
    live = httpx.get(f"{base}/healthz")
    health.progress(time.monotonic() - 31)
    stalled = httpx.get(f"{base}/healthz")

    assert (live.status_code, live.text.strip()) == (200, "ok")
    assert stalled.status_code == 503
    assert stalled.text.startswith("event loop silent for")


def test_serves_on_ipv6_loopback_too():
    registry = CollectorRegistry()
    RelayMetrics(registry).add_prefix("stm")
    try:
        handle = serve_http("::1", 0, registry, Health())
    except OSError as exc:
        # Only a machine without IPv6 loopback may skip (never under CI: support.ci_rules);
        # IPv4 HTTP is tested above regardless.
        if exc.errno not in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
            raise
        pytest.skip(f"no IPv6 loopback here ({errno.errorcode[exc.errno]})")
    try:
        response = httpx.get(f"http://[::1]:{handle.port}/metrics")
    finally:
        handle.close()

    assert "relayd_active" in response.text
