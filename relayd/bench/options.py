"""``relayd bench``'s options, declared here (``relayd.options``): the command's own, read by it alone.

Each is a flag without a prefix (``--backlog``) and a ``RELAYD_BENCH_<NAME>`` variable, never
``RELAYD_<NAME>``: a benchmark seeds and deletes keys, so it must never pick up a production
``RELAYD_REDIS_URL`` from the environment by accident. The values go to the bench's
configuration (``relayd.bench.harness.BenchConfig``), not to ``Settings``: the CLI takes them
``direct`` (``relayd.cli.options``), its bounds checked by click.

Light on purpose (the CLI imports it to build its flags): nothing of the harness, Redis or rich.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from relayd.engine.options import TuningOptions
from relayd.options import option
from relayd.sinks.options import FormatOptions
from relayd.sinks.webhook.options import WebhookOptions


@dataclass(frozen=True, slots=True)
class BenchOptions:
    """Where the bench runs, what it seeds and drains, which suites, and how it reports."""

    env_prefix: ClassVar[str] = "bench"

    redis_url: str | None = option(
        None,
        "Redis to benchmark on (default: a throwaway redis-server on a free loopback "
        "port if one is on PATH, else the embedded fakeredis).",
        panel=None,
    )
    sink: str | None = option(
        None,
        "Sink spec ('null', 'jsonl:PATH', 'redis-stream:URL?stream=NAME', 'webhook:URL'); "
        "'{prefix}', '{redis_url}' and '{tmpdir}' are filled in, 'webhook:local' is an HTTP server "
        "the bench starts on loopback. Default: one trimmed stream on the same Redis.",
        panel=None,
    )
    http_server: str = option("aiohttp", "The server behind 'webhook:local': aiohttp or uvicorn.", panel=None)
    webhook_secret_file: Path | None = option(None, "Sign webhook requests with this file's key.", panel=None)
    webhook_concurrency: int = option(
        WebhookOptions().concurrency,
        "Webhook requests in flight (sink and baseline).",
        panel=None,
        constraints={"ge": 1},
    )
    webhook_batch: int = option(
        WebhookOptions().batch,
        "Most envelopes in one webhook request of the relay (the baseline posts one each).",
        panel=None,
        constraints={"ge": 1},
    )
    output_format: Literal["relayd", "cloudevents"] = option(
        FormatOptions().format,
        "What the relay's sink sends: the relayd/1 envelope or CloudEvents.",
        panel=None,
        flag="--format",
    )
    backlog: int = option(100_000, "Entries seeded per kind.", panel=None, constraints={"ge": 1})
    kinds: str = option("outbox,spawn,timer", "Kinds to drain, comma-separated.", panel=None)
    batch: int = option(
        TuningOptions().batch, "Entries per read and per sink call.", panel=None, constraints={"ge": 1}
    )
    baseline: bool = option(
        True, "Also drain an identical backlog the incumbent's way.", panel=None, negatable=True
    )
    repeat: int = option(
        1,
        "Relay drains per kind (and client-baseline runs, alternating); medians reported.",
        panel=None,
        constraints={"ge": 1},
    )
    suite: str = option(
        "drain", "drain, scale, timers, idle, wake, steady (comma-separated) or all.", panel=None
    )
    scale_backlog: int = option(
        1_000_000, "The large backlog of the scale suite.", panel=None, constraints={"ge": 1000}
    )
    timer_duration: float = option(30.0, "Seconds of the timers suite.", panel=None, constraints={"ge": 1.0})
    timer_rate: int = option(10_000, "Timers due per second.", panel=None, constraints={"ge": 1})
    idle_duration: float = option(10.0, "Seconds of the idle suite.", panel=None, constraints={"ge": 1.0})
    wake_commits: int = option(
        20, "Single commits per run of the wake suite.", panel=None, constraints={"ge": 1}
    )
    steady_rates: str = option(
        "1000,5000,20000", "Commits per second of the steady suite's runs, comma-separated.", panel=None
    )
    steady_seconds: float = option(
        8.0, "Measured seconds per rate of the steady suite.", panel=None, constraints={"ge": 0.5}
    )
    steady_warmup: float = option(
        2.0, "Unmeasured seconds before each steady run.", panel=None, constraints={"ge": 0.0}
    )
    as_json: bool = option(False, "Print one JSON document instead of tables.", panel=None, flag="--json")
