"""Benchmark: the webhook sink's throughput with an OAuth2 token and without, interleaved rounds.

Run: ``python tests/benchmarks/bench_webhook_oauth2.py [COUNT] [ROUNDS]``. Starts the bench's own
HTTP target (``relayd.bench.http_target``, in its own process) and a token endpoint on this
process's loop, then per round delivers ``COUNT`` envelopes through a ``WebhookSink`` (batches of
500, a key each, the default concurrency of 16), once without and once with
``--webhook-oauth2-token-url``, alternating which goes first. Prints the median entries/s of
each, the sink process's CPU per entry, the ratios (on/off: of the medians, and the median of
each round's pair) and the grants made (one per run: the token is cached).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

from aiohttp import web

from relayd.bench.http_target import http_target
from relayd.envelope.batch import Batch
from relayd.security.material import Fixed
from relayd.sinks import DELIVERED, SinkOptions, SinkSpec
from relayd.sinks.testing import outbox_envelope
from relayd.sinks.webhook.options import WebhookOptions
from relayd.sinks.webhook.sink import WebhookSink

BATCH = 500


async def _token_endpoint() -> tuple[web.AppRunner, str, list[int]]:
    grants: list[int] = []

    async def token(request: web.Request) -> web.Response:
        await request.read()
        grants.append(1)
        return web.json_response({"access_token": "bench-token", "token_type": "Bearer", "expires_in": 3600})

    app = web.Application()
    app.router.add_post("/token", token)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}/token", grants


async def _run(url: str, count: int, own: WebhookOptions) -> tuple[float, float]:
    """Entries/s and CPU seconds per entry of one delivery of ``count`` envelopes."""
    sink = WebhookSink(SinkSpec("webhook", url), SinkOptions(own=own))
    await sink.start()
    batches = [
        Batch.of(
            [outbox_envelope("bench", seq, f"t{seq}") for seq in range(first, min(first + BATCH, count))]
        )
        for first in range(0, count, BATCH)
    ]
    cpu0, wall0 = time.process_time(), time.monotonic()
    for batch in batches:
        outcomes = await sink.deliver(batch)
        if list(outcomes) != [DELIVERED] * len(batch):
            raise RuntimeError(f"not delivered: {outcomes[0]}")
    wall, cpu = time.monotonic() - wall0, time.process_time() - cpu0
    await sink.close()
    return count / wall, cpu / count


async def _main(url: str, count: int, rounds: int) -> None:
    runner, token_url, grants = await _token_endpoint()
    modes: dict[str, Any] = {
        "off": WebhookOptions(),
        "on": WebhookOptions(
            oauth2_token_url=token_url,
            oauth2_client_id=Fixed("bench"),
            oauth2_client_secret=Fixed("bench-secret"),
        ),
    }
    rates: dict[str, list[float]] = {name: [] for name in modes}
    cpus: dict[str, list[float]] = {name: [] for name in modes}
    await _run(url, BATCH, modes["off"])  # warm-up: imports, the target's first connections
    for round_ in range(rounds):
        order = list(modes) if round_ % 2 == 0 else list(reversed(modes))
        for name in order:
            rate, cpu = await _run(url, count, modes[name])
            rates[name].append(rate)
            cpus[name].append(cpu)
    await runner.cleanup()
    for name in modes:
        print(
            f"oauth2 {name:3}  {statistics.median(rates[name]):8.0f} entries/s  "
            f"{statistics.median(cpus[name]) * 1e6:6.1f} us CPU/entry  rounds: "
            + " ".join(f"{rate:.0f}" for rate in rates[name])
        )
    ratio = statistics.median(rates["on"]) / statistics.median(rates["off"])
    paired = statistics.median(on / off for on, off in zip(rates["on"], rates["off"], strict=True))
    cpu_ratio = statistics.median(cpus["on"]) / statistics.median(cpus["off"])
    print(
        f"on/off entries/s: {ratio:.3f} (medians), {paired:.3f} (median of rounds); "
        f"CPU/entry {cpu_ratio:.3f}; grants: {len(grants)} over {rounds} runs with oauth2"
    )


def main(count: int, rounds: int) -> None:
    with http_target("aiohttp") as url:
        asyncio.run(_main(url, count, rounds))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5000, int(sys.argv[2]) if len(sys.argv) > 2 else 5)
