"""The probes: liveness from the event loop's heartbeat, readiness from Redis and the sinks."""

from __future__ import annotations

from relayd.observability.health import Health, HealthSnapshot, healthz, readyz


def test_healthz_fails_once_the_event_loop_stops_beating():
    snap = HealthSnapshot(last_progress_s=100.0)

    fresh = healthz(snap, now_s=130.0, stale_after_s=60.0)
    stale = healthz(snap, now_s=161.0, stale_after_s=60.0)

    assert (fresh.ok, fresh.status) == (True, 200)
    assert (stale.ok, stale.status, stale.reason) == (False, 503, "event loop silent for 61.0s")


def test_readyz_names_what_is_not_ready():
    redis_down = readyz(HealthSnapshot(redis_error="ConnectionError"))
    sink_down = readyz(
        HealthSnapshot(redis_error=None, sinks_ready={"outbox:webhook": False, "timer:log": True})
    )
    ok = readyz(HealthSnapshot(redis_error=None, sinks_ready={"outbox:log": True}))

    assert (redis_down.status, redis_down.reason) == (503, "redis: ConnectionError")
    assert (sink_down.status, sink_down.reason) == (503, "sink not ready: outbox:webhook")
    assert (ok.status, ok.reason) == (200, "ok")


def test_health_asks_the_sinks_at_probe_time_and_treats_errors_as_not_ready():
    health = Health()
    state = {"ready": False}

    def broken() -> bool:
        raise RuntimeError

    health.watch_sinks({"a": lambda: state["ready"], "b": lambda: True})
    health.redis_ok()
    before = health.ready()
    state["ready"] = True
    after = health.ready()
    health.watch_sinks({"c": broken})

    assert (before.ok, after.ok, health.ready().ok) == (False, True, False)


def test_not_ready_before_redis_answered_and_while_stopping():
    health = Health()
    starting = health.ready()
    health.redis_ok()
    health.stopping()

    assert (starting.ok, health.ready().reason) == (False, "shutting down")


def test_readyz_through_sentinels_names_the_failover_step_it_waits_for():
    """No master named yet, or the named master silent: /readyz says which, and for what service."""
    no_master = readyz(HealthSnapshot(redis_error="MasterNotFoundError", sentinel_service="cache"))
    silent = readyz(HealthSnapshot(redis_error="ConnectionError", sentinel_service="cache"))

    assert no_master.status == 503
    assert no_master.reason == (
        "redis: waiting for the sentinels to name a master for 'cache' (MasterNotFoundError)"
    )
    assert (
        silent.reason == "redis: waiting for the master of 'cache' named by the sentinels (ConnectionError)"
    )


def _broken_reason() -> str | None:
    """A sink's readiness reason that raises (as a buggy plugin's might)."""
    raise ZeroDivisionError


def test_readyz_gives_the_reason_a_sink_states_for_not_being_ready():
    """A sink's optional not_ready_reason() is shown; a ready sink's reason is not asked for."""
    health = Health()
    health.redis_ok()
    state = {"ready": False}
    health.watch_sinks(
        {"outbox:amqp": lambda: state["ready"], "timer:log": lambda: True},
        {"outbox:amqp": lambda: "amqp: 2 unroutable message(s)", "timer:log": _broken_reason},
    )

    answer = health.ready()
    state["ready"] = True

    assert answer.reason == "sink not ready: outbox:amqp (amqp: 2 unroutable message(s))"
    assert answer.status == 503
    assert health.ready().ok


def test_readyz_names_each_kind_whose_key_has_the_wrong_type_until_it_is_fixed():
    health = Health()
    health.redis_ok()

    health.lanes_parked("a", {"outbox": "a:outbox is a string, not a hash"})
    health.lanes_parked("b", {"timer": "b:timers is a hash, not a zset"})
    parked = health.ready()
    health.lanes_parked("a", {})
    one_left = health.ready()
    health.lanes_parked("b", {})

    assert parked.status == 503
    assert "a:outbox is a string, not a hash" in parked.reason
    assert "b:timers is a hash, not a zset" in parked.reason
    assert "a:outbox" not in one_left.reason
    assert "b:timers" in one_left.reason
    assert health.ready().ok


def test_an_open_breaker_is_named_first_with_when_and_why() -> None:
    snapshot = HealthSnapshot(
        redis_error=None,
        sinks_ready={"outbox:webhook": False},
        breakers_open={"webhook": "open since 2026-12-02T03:00:00Z: webhook timeout (TimeoutError)"},
    )

    answer = readyz(snapshot)

    assert not answer.ok
    assert answer.reason == (
        "sink webhook open since 2026-12-02T03:00:00Z: webhook timeout (TimeoutError); "
        "sink not ready: outbox:webhook"
    )
