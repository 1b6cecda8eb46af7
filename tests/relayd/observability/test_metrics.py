"""Every metric name of docs/metrics.md exists on an injected registry, with bounded labels."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from relayd import __version__
from relayd.observability.metrics import RelayMetrics, observe_many

METRIC_NAMES = [
    "relayd_delivered_total",
    "relayd_delivery_attempts_total",
    "relayd_dead_lettered_total",
    "relayd_backlog_entries",
    "relayd_dead_letters",
    "relayd_oldest_due_age_seconds",
    "relayd_timer_lag_seconds",
    "relayd_sink_latency_seconds",
    "relayd_sweep_duration_seconds",
    "relayd_redis_errors_total",
    "relayd_active",
    "relayd_lease_transitions_total",
    "relayd_last_sweep_timestamp_seconds",
    "relayd_build_info",
]


def test_every_design_metric_is_exposed_once_a_prefix_is_added():
    registry = CollectorRegistry()
    metrics = RelayMetrics(registry)

    metrics.add_prefix("stm")
    text = generate_latest(registry).decode()

    missing = [name for name in METRIC_NAMES if f"\n{name}" not in text and f"\n{name}_bucket" not in text]
    assert missing == []
    assert registry.get_sample_value("relayd_build_info", {"version": __version__, "python": _python()}) == 1
    assert registry.get_sample_value("relayd_active", {"prefix": "stm"}) == 0
    assert (
        registry.get_sample_value(
            "relayd_dead_lettered_total", {"prefix": "stm", "kind": "timer", "reason": "bad_member"}
        )
        == 0
    )


def test_two_registries_do_not_collide():
    """No process-global REGISTRY: two relays in one process each get their own metrics."""
    a, b = RelayMetrics(CollectorRegistry()), RelayMetrics(CollectorRegistry())

    a.delivered.labels("p", "outbox").inc(3)

    assert a.registry.get_sample_value("relayd_delivered_total", {"prefix": "p", "kind": "outbox"}) == 3
    assert b.registry.get_sample_value("relayd_delivered_total", {"prefix": "p", "kind": "outbox"}) is None


def _python() -> str:
    import platform

    return platform.python_version()


def test_observe_many_leaves_the_same_samples_as_observing_one_by_one():
    """Bucket counts (bounds included), count and sum match ``observe`` per amount."""
    amounts = [0.0, 0.001, 0.0049, 0.005, 0.3, 2.0, 7.5, 1e6, 0.005, 0.0]
    one_by_one, batched = RelayMetrics(CollectorRegistry()), RelayMetrics(CollectorRegistry())
    for amount in amounts:
        one_by_one.timer_lag.labels("p").observe(amount)

    observe_many(batched.timer_lag.labels("p"), amounts)
    observe_many(batched.timer_lag.labels("p"), [])

    def samples(metrics: RelayMetrics) -> dict[tuple[str, str], float]:
        [family] = [m for m in metrics.registry.collect() if m.name == "relayd_timer_lag_seconds"]
        return {(s.name, s.labels.get("le", "")): s.value for s in family.samples if "_created" not in s.name}

    expected, actual = samples(one_by_one), samples(batched)
    assert expected.keys() == actual.keys()
    assert {k: v for k, v in expected.items() if k[0] != "relayd_timer_lag_seconds_sum"} == {
        k: v for k, v in actual.items() if k[0] != "relayd_timer_lag_seconds_sum"
    }
    assert actual[("relayd_timer_lag_seconds_sum", "")] == pytest.approx(sum(amounts))
    assert actual[("relayd_timer_lag_seconds_count", "")] == len(amounts)
