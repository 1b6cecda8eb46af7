"""``relayd bench`` at a tiny size: the JSON shape, sane figures, everything drained and cleaned up."""

from __future__ import annotations

import json
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest
import redis
from rich.console import Console
from typer.testing import CliRunner

from relayd.bench.meter import TimingSink
from relayd.bench.stats import (
    COMMITTED_AT,
    RunFigures,
    commands_delta,
    committed_at,
    kind_row,
    median_run,
    parse_commandstats,
    percentile,
    sane,
)
from relayd.bench.steady import SteadyRun
from relayd.cli.app import app
from relayd.cli.bench import render
from relayd.demo.embedded import EmbeddedRedis
from relayd.envelope import Envelope
from relayd.envelope.batch import Batch
from relayd.sinks.base import DELIVERED, Delivered, Retry

#: ``relayd bench`` configures logging onto CliRunner's stream; later tests must not log there.
pytestmark = pytest.mark.usefixtures("restore_logging")


@pytest.fixture
def bench_url(backend: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A Redis URL on the parametrised backend (fakeredis served over TCP, as the bench's own)."""
    if backend == "real":
        yield request.getfixturevalue("redis_server").url
        return
    with EmbeddedRedis() as server:
        yield server.url


def _bench(*args: str) -> dict:
    result = CliRunner().invoke(app, ["bench", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _bench_keys(url: str) -> list[bytes]:
    with redis.Redis.from_url(url) as client:
        return list(client.scan_iter(match="bench*"))


@pytest.mark.parametrize("sink", ["default", "null", "jsonl"])
def test_bench_drains_every_kind_with_relay_and_baseline_and_cleans_up(
    bench_url: str, sink: str, backend: str, tmp_path: Path
) -> None:
    """Every seeded entry is delivered once by each method, nothing is left, no key survives."""
    extra = (
        []
        if sink == "default"
        else ["--sink", "null" if sink == "null" else f"jsonl:{tmp_path / 'out.jsonl'}"]
    )

    report = _bench("--redis-url", bench_url, "--backlog", "250", "--batch", "100", *extra)

    assert report["problems"] == []
    assert [row["kind"] for row in report["kinds"]] == ["outbox", "spawn", "timer"]
    for row in report["kinds"]:
        for method in ("relay", "baseline"):
            fig = row[method]
            assert (fig["entries"], fig["delivered"], fig["left"]) == (250, 250, 0)
            assert fig["entries_per_s"] > 0
            assert fig["cpu_per_entry_us"] > 0
            if method == "relay" or sink != "jsonl":  # a client baseline publishes bodies: no latency
                assert 0 <= fig["p50_latency_s"] <= fig["p99_latency_s"] <= fig["max_latency_s"] < 60
            assert fig["cpu_s"] > 0
            assert fig["peak_rss_mb"] > 0
            if backend == "real" and (method == "relay" or sink != "jsonl"):  # the fake has no INFO
                assert fig["commands_per_entry"] > 0
        assert row["speedup"] > 0
    if backend == "real":
        # the server's own CPU over each run (INFO cpu), which the drain table prints too
        assert sum(row[m]["redis_cpu_s"] for row in report["kinds"] for m in ("relay", "baseline")) > 0
        relay_cmds = report["kinds"][0]["relay"]["commands"]
        assert relay_cmds.get("hgetall") is None  # the relay never reads the whole hash
        if sink != "jsonl":
            assert report["kinds"][0]["baseline"]["commands"]["hdel"] == 250  # one round-trip each
    if sink == "jsonl":  # the relay's lines and the JSONL baseline's, the same bodies
        assert len((tmp_path / "out.jsonl").read_bytes().splitlines()) == 6 * 250
        assert {row["baseline_by"] for row in report["kinds"]} == {"jsonl client publishing the same bodies"}
    else:
        assert report["kinds"][0]["baseline_by"] == "incumbent-style drain, one round-trip per entry"
    assert _bench_keys(bench_url) == []


def test_repeat_reports_the_median_drain_and_lists_every_rate(bench_url: str) -> None:
    """--repeat 3: three relay drains per kind, the middle one reported, all of them drained."""
    report = _bench("--redis-url", bench_url, "--backlog", "200", "--kinds", "outbox", "--repeat", "3")

    (row,) = report["kinds"]
    rates = row["relay_entries_per_s"]
    assert len(rates) == 3
    assert row["relay"]["entries_per_s"] == sorted(rates)[1]
    assert row["relay"]["delivered"] == 200
    assert row["speedup"] == pytest.approx(sorted(rates)[1] / row["baseline"]["entries_per_s"], rel=0.01)
    assert report["problems"] == []
    assert _bench_keys(bench_url) == []


@pytest.mark.slow
def test_bench_scale_timers_and_idle_suites_report_their_figures(redis_server) -> None:
    """The other suites run at a tiny size and report the figures docs/performance.md quotes."""
    report = _bench(
        "--redis-url",
        redis_server.url,
        "--suite",
        "scale,timers,idle",
        "--scale-backlog",
        "3000",
        "--batch",
        "500",
        "--timer-rate",
        "500",
        "--timer-duration",
        "1",
        "--idle-duration",
        "1",
    )

    scale = report["scale"]
    assert scale["1000"]["delivered"] == 1000
    assert scale["3000"]["delivered"] == 3000
    assert scale["3000"]["left"] == 0
    assert scale["pass_cost_ratio"] > 0
    timers = report["timers"]
    assert (timers["delivered"], timers["left"], timers["early"]) == (500, 0, 0)
    assert timers["p99_latency_s"] is not None
    idle = report["idle"]
    assert idle["commands_per_s"] > 0
    assert 0 <= idle["cpu_share"] < 1
    assert _bench_keys(redis_server.url) == []


@pytest.mark.slow
def test_bench_wake_suite_on_a_given_redis_never_changes_its_configuration(redis_server) -> None:
    """On a --redis-url the bench reports polling-only figures instead of enabling notifications."""
    before = redis.Redis(port=redis_server.port).config_get("notify-keyspace-events")

    report = _bench("--redis-url", redis_server.url, "--suite", "wake", "--wake-commits", "3")

    wake = report["wake"]
    assert (wake["notifications"], wake["configured_by_bench"]) == (False, False)
    assert wake["on"]["delivered"] == wake["off"]["delivered"] == 3
    assert wake["off"]["p50_latency_s"] > 0
    assert redis.Redis(port=redis_server.port).config_get("notify-keyspace-events") == before
    assert _bench_keys(redis_server.url) == []


def test_bench_steady_suite_delivers_every_commit_once_and_reports_a_row_per_rate(redis_server) -> None:
    """Two tiny rates for a second each: every commit in the stream once, one table row per rate."""
    report = _bench(
        "--redis-url",
        redis_server.url,
        "--suite",
        "steady",
        "--steady-rates",
        "20,50",
        "--steady-seconds",
        "1",
        "--steady-warmup",
        "0.5",
    )

    steady = report["steady"]
    assert [row["rate_per_s"] for row in steady["rates"]] == [20, 50]
    for row in steady["rates"]:
        assert row["committed"] >= row["rate_per_s"]  # warm-up and measured stretch
        assert (row["delivered"], row["duplicates"]) == (row["committed"], 0)
        assert row["entries"] > 0
        assert 0 <= row["p50_ms"] <= row["p90_ms"] <= row["p99_ms"] <= row["max_ms"]
        assert row["relay_cpu_pct"] > 0
        assert row["relay_cpu_us_per_entry"] > 0
        assert row["entries_per_pass"] > 0
    assert report["problems"] == []
    assert _bench_keys(redis_server.url) == []
    out = StringIO()
    render(report, Console(file=out, width=200))
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in out.getvalue().splitlines()]
    rows = [row for row in rows if row[1:2] == ["all"]]
    assert [row[0] for row in rows] == ["20", "50"]
    assert all(len(row) == 10 and "-" not in row for row in rows)


def test_a_steady_run_missing_or_repeating_commits_reports_problems() -> None:
    def run(delivered: int, duplicates: int) -> SteadyRun:
        return SteadyRun(
            rate=100,
            committed=300,
            delivered=delivered,
            duplicates=duplicates,
            latencies_ms=[4.0, 1.0, 2.0, 3.0],
            relay_cpu_s=0.02,
            redis_cpu_s=0.01,
            seconds=2.0,
            passes=2,
        )

    assert run(300, 0).problems() == []
    assert run(299, 1).problems() == [
        "steady 100/s: delivered 299 of 300 commits",
        "steady 100/s: 1 commits delivered twice",
    ]
    row = run(300, 0).row()
    assert (row["p50_ms"], row["p99_ms"], row["max_ms"]) == (2.0, 4.0, 4.0)
    assert (row["relay_cpu_pct"], row["relay_cpu_us_per_entry"], row["entries_per_pass"]) == (
        1.0,
        5000.0,
        2.0,
    )


def test_unknown_kind_is_a_usage_error() -> None:
    result = CliRunner().invoke(app, ["bench", "--kinds", "outbox,bogus"])

    assert result.exit_code == 2
    assert "--kinds" in result.output


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"kind": "outbox", "event": {"data": {"committed_at": 5.0}}}, 5.0),
        ({"kind": "spawn", "context": {"committed_at": 6}}, 6.0),
        ({"kind": "timer", "fire_at": 7.5}, 7.5),
        ({"kind": "outbox", "event": {"data": {}}}, None),
        ({"kind": "spawn", "context": "nope"}, None),
    ],
    ids=["outbox", "spawn", "timer", "outbox-unstamped", "spawn-malformed"],
)
def test_committed_at_reads_the_seeders_stamp(body: dict, expected: float | None) -> None:
    assert committed_at(body) == expected


def test_percentile_is_nearest_rank() -> None:
    values = [float(n) for n in range(1, 101)]

    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (50.0, 99.0, 100.0)
    assert percentile([], 50) is None


def test_commands_delta_leaves_out_probes_and_unchanged_commands() -> None:
    before = parse_commandstats({"cmdstat_xadd": {"calls": 10}, "cmdstat_info": {"calls": 3}})
    after = parse_commandstats(
        {"cmdstat_xadd": {"calls": 15}, "cmdstat_info": {"calls": 9}, "cmdstat_hdel": {"calls": 2}}
    )

    assert commands_delta(before, after) == {"hdel": 2, "xadd": 5}


def test_kind_row_reports_speedup_and_sanity() -> None:
    relay = RunFigures("relay", "outbox", 100, 100, 0, 0.5, 0.1, latencies_s=(0.1, 0.2), commands={"x": 50})
    baseline = RunFigures("baseline", "outbox", 100, 90, 10, 10.0, 1.0)

    row = kind_row(relay, baseline)

    assert row["speedup"] == round(200 / 9, 2)
    assert row["relay"]["commands_per_entry"] == 0.5
    assert sane([relay, baseline]) == [
        "baseline outbox: 10 entries left undrained",
        "baseline outbox: delivered 90 of 100",
    ]


def test_median_run_takes_the_middle_rate_and_the_slower_of_two_middles() -> None:
    runs = [RunFigures("relay", "outbox", 100, 100, 0, duration, 0.1) for duration in (1.0, 4.0, 2.0, 0.5)]

    assert median_run(runs[:3]).duration_s == 2.0  # rates 100, 25, 50: the middle is 50
    assert median_run(runs).duration_s == 2.0  # rates 100, 25, 50, 200: 50 is the slower middle
    assert median_run(runs[:1]) is runs[0]


class _Answers:
    """A sink that answers the outcomes it is given, whatever the batch."""

    name = "answers"

    def __init__(self, outcomes: list) -> None:
        self.outcomes = outcomes

    async def start(self) -> None: ...

    async def deliver(self, batch):  # type: ignore[no-untyped-def]
        return self.outcomes

    def ready(self) -> bool:
        return True

    async def close(self) -> None: ...


@pytest.mark.parametrize(
    ("outcomes", "delivered", "sampled"),
    [
        ([DELIVERED] * 3, 3, [10.0, 7.0]),  # the 1st and 3rd: one in two
        ([DELIVERED, Retry(error="x"), Delivered()], 2, [10.0]),  # the retried one is not counted
        ([Retry(error="x")] * 3, 0, []),
    ],
)
async def test_the_timing_sink_counts_and_samples_only_confirmed_entries(
    outcomes, delivered, sampled
) -> None:
    batch = [
        Envelope(f"p:outbox:{n}", "outbox", "p", 1, {"kind": "outbox", "event": {"data": {COMMITTED_AT: t}}})
        for n, t in enumerate([90.0, 95.0, 93.0])
    ]
    sink = TimingSink(_Answers(outcomes), clock=lambda: 100.0, sample_every=2)

    await sink.deliver(Batch.of(batch))

    assert sink.delivered == delivered
    assert list(sink.latencies_s) == sampled


def test_the_scale_table_has_a_row_per_backlog_and_the_ratio_below() -> None:
    def figures(backlog: int, pass_s: float) -> dict:
        return {"backlog": backlog, "median_pass_s": pass_s, "p99_pass_s": pass_s, "entries_per_s": 9.0}

    scale = {"batch": 5, "1000": figures(1000, 0.002), "3000": figures(3000, 0.003), "pass_cost_ratio": 1.5}
    for fig in (scale["1000"], scale["3000"]):
        fig["peak_rss_mb"] = 42.0
    report = {"redis": "given", "hiredis": True, "backlog": 10, "batch": 5, "sink": "null", "scale": scale}
    out = StringIO()

    render(report | {"problems": []}, Console(file=out, width=200))

    rows = [line for line in out.getvalue().splitlines() if "42" in line]
    assert [row.split()[1] for row in rows] == ["1,000", "3,000"]
    assert "2.00" in rows[0]
    assert "3.00" in rows[1]
    assert "pass cost large/small: 1.50x" in out.getvalue()
