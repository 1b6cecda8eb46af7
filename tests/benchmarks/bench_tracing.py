"""Benchmark: what tracing costs the outbox drain into a Redis stream, alternating in one run.

Each drain is one ``relayd bench --kinds outbox --no-baseline --json`` process (the real engine
into the default stream sink on a throwaway redis-server), in one of these modes:

- ``old``: the code before tracing (``--old PATH``, a checkout of it; left out without one),
  entries as harel writes them;
- ``off``: this checkout, no OTEL_* variables, the same entries: what the hooks cost a relay
  that does not trace (one check per batch; the columns that carry a stored trace context);
- ``handed-on``: tracing off, every entry carrying a producer's trace context as ``store``
  records it at commit, a trace of its own for each entry (the worst case for links), which
  the stream sink hands on as each entry's ``traceparent`` field;
- ``on``: those entries, and relayd's own spans at full sampling (``OTEL_TRACES_SAMPLER=
  always_on``): a span per batch linked to each entry's producer, and a span of its own for
  each entry (every producer context is sampled), exported with OTLP/HTTP by the batch
  processor every 100 ms (so the export runs during the drain) to a local receiver in a
  process of its own that reads and discards every request;
- ``on-sparse``: the same, but only a share of the producer contexts sampled (flags ``01``; the
  rest ``00``; ``--sparse``, by default one in a hundred), so only those entries get spans of
  their own.

Rounds rotate the order of the modes, so a machine whose speed drifts slows all alike. Printed:
each mode's median entries/s and relay CPU µs per entry, and each mode's rate over ``off``'s
(the geometric mean of the round-by-round ratios), ``on`` and ``on-sparse`` also over
``handed-on``; the export requests and bytes the receiver got. With ``--old``, ``old-on`` is the
old checkout in ``on``'s setting (its spans, whatever they were then).

Run: ``python tests/benchmarks/bench_tracing.py [--old PATH] [--rounds 3] [--backlog 50000]``,
with ``PATH`` for example ``git archive <commit> relayd store | tar -x -C /tmp/old``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]

#: One drain: seeds (entries with a stored trace context when asked), traces when OTEL_* ask.
DRIVER = """
import os, secrets, sys
if os.environ.get("BENCH_TRACED_ENTRIES"):
    import store.codec
    encode = store.codec.encode_outbox_value
    import random
    ratio = float(os.environ.get("BENCH_SAMPLED_RATIO", "1"))
    def traced(target, event, trace=None):
        flags = "01" if random.random() < ratio else "00"
        context = f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-{flags}"
        return encode(target, event, {"traceparent": context})
    store.codec.encode_outbox_value = traced
stop = None
if os.environ.get("OTEL_TRACES_EXPORTER"):
    from relayd.observability.tracing.setup import start_tracing
    stop = start_tracing()
from relayd.cli.app import main
try:
    main(["bench", *sys.argv[1:]])
finally:
    if stop is not None:
        stop()
"""

#: A receiver that reads every request, answers 200 and keeps only counts (in ``argv[1]``).
RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
counts = [0, 0]
class Discard(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        counts[0] += 1
        counts[1] += len(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
        with open(sys.argv[1], "w") as out:
            out.write(f"{counts[0]} {counts[1]}")
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), Discard)
print(server.server_address[1], flush=True)
server.serve_forever()
"""

MODES = ("old", "old-on", "off", "handed-on", "on", "on-sparse")


def _drain(root: Path, backlog: int, extra_env: dict[str, str]) -> tuple[float, float]:
    """(entries/s, relay CPU µs per entry) of one outbox drain by the checkout at ``root``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAYD_", "OTEL_"))}
    env |= {"PYTHONPATH": str(root), **extra_env}
    argv = ["--kinds", "outbox", "--backlog", str(backlog), "--no-baseline", "--json"]
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, *argv], cwd=root, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"relayd bench in {root} exited {done.returncode}: {done.stderr[-800:]}")
    report = json.loads(done.stdout[done.stdout.index("{") :])
    (outbox,) = (k["relay"] for k in report["kinds"] if k["kind"] == "outbox")
    return outbox["entries_per_s"], outbox["cpu_s"] / outbox["entries"] * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, help="a checkout of the code before tracing")
    parser.add_argument("--rounds", type=int, default=3, help="drains of each mode (medians kept)")
    parser.add_argument("--backlog", type=int, default=50_000, help="outbox entries seeded per drain")
    parser.add_argument(
        "--sparse", type=float, default=0.01, help="share of producers sampled in 'on-sparse'"
    )
    parser.add_argument("--links", type=int, help="OTEL_SPAN_LINK_COUNT_LIMIT for 'on' (relayd's default)")
    args = parser.parse_args()
    modes = [m for m in MODES if not m.startswith("old") or args.old is not None]
    with tempfile.TemporaryDirectory() as tmp:
        counts_file = Path(tmp) / "received"
        receiver = subprocess.Popen(
            [sys.executable, "-c", RECEIVER, str(counts_file)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert receiver.stdout is not None
            endpoint = f"http://127.0.0.1:{receiver.stdout.readline().strip()}/v1/traces"
            traced = {"BENCH_TRACED_ENTRIES": "1"}
            setups = {
                "old": (args.old.resolve() if args.old else HERE, {}),
                "off": (HERE, {}),
                "handed-on": (HERE, traced),
                "on": (
                    HERE,
                    traced
                    | {
                        "OTEL_TRACES_EXPORTER": "otlp",
                        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
                        "OTEL_TRACES_SAMPLER": "always_on",
                        "OTEL_BSP_SCHEDULE_DELAY": "100",
                    }
                    | ({"OTEL_SPAN_LINK_COUNT_LIMIT": str(args.links)} if args.links is not None else {}),
                ),
            }
            setups["on-sparse"] = (HERE, setups["on"][1] | {"BENCH_SAMPLED_RATIO": str(args.sparse)})
            setups["old-on"] = (setups["old"][0], setups["on"][1])
            runs: dict[str, list[tuple[float, float]]] = {mode: [] for mode in modes}
            for round_ in range(args.rounds):
                order = modes[round_ % len(modes) :] + modes[: round_ % len(modes)]
                for mode in order:
                    root, extra = setups[mode]
                    runs[mode].append(_drain(root, args.backlog, extra))
                    print(f"round {round_ + 1} {mode:<10} {runs[mode][-1][0]:>9.0f} /s", file=sys.stderr)
            received = counts_file.read_text() if counts_file.exists() else "0 0"
        finally:
            receiver.terminate()
            receiver.wait(10)
    print(f"{'mode':<10} {'entries/s':>10} {'µs/entry':>9} {'/off':>7}")
    for mode in modes:
        rate = statistics.median(r for r, _ in runs[mode])
        cpu = statistics.median(c for _, c in runs[mode])
        ratio = statistics.geometric_mean([m[0] / o[0] for m, o in zip(runs[mode], runs["off"], strict=True)])
        print(f"{mode:<10} {rate:>10.0f} {cpu:>9.2f} {ratio:>7.3f}")
    for mode in [m for m in modes if m in ("old-on", "on", "on-sparse")]:
        over = statistics.geometric_mean(
            [n[0] / h[0] for n, h in zip(runs[mode], runs["handed-on"], strict=True)]
        )
        print(f"{mode} / handed-on: {over:.3f}")
    requests, size = received.split()
    print(f"OTLP export: {requests} requests, {int(size) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
