"""Stand in for an engine in the compose example: commit a steady workload through ``store``.

Each round creates one execution the way an engine's commit would: it emits an event to an
earlier execution (or an untargeted one), spawns a child and arms a timer a few seconds ahead,
all in one atomic ``RedisStore.commit``. relayd, running beside it, drains the result.

Configured only by environment (so the relayd image can run it unchanged):

    WORKLOAD_REDIS_URL   redis://redis:6379/0
    WORKLOAD_PREFIX      stm
    WORKLOAD_RATE        commits per second (default 5)
    WORKLOAD_ROUNDS      stop after this many commits; 0 runs until stopped (default 0)
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from collections.abc import Mapping
from types import FrameType

from store import Event, Execution, RedisStore, TimerOp

#: How far ahead the workload arms its timers, in seconds (so they come due while watched).
TIMER_DELAY_RANGE_S = (1.0, 15.0)


def commit_round(store: RedisStore, *, run_id: str, round_no: int, now_s: float, rng: random.Random) -> str:
    """Commit execution ``order-{run_id}-{round_no}`` with an emit, a spawn and a timer; return its id."""
    exe = Execution(id=f"order-{run_id}-{round_no}", definition_id="order")
    # Every fifth event is untargeted (a broadcast); the rest go to an earlier order of this run.
    target_id = None if round_no % 5 == 0 else f"order-{run_id}-{rng.randrange(round_no)}"
    event = Event(kind="OrderPlaced", data={"order": exe.id, "amount_cents": rng.randrange(100, 100_000)})
    store.commit(
        exe,
        [(target_id, event)],
        timers=(
            TimerOp(
                action="schedule",
                path="order.awaiting_payment",
                fire_at=now_s + rng.uniform(*TIMER_DELAY_RANGE_S),
            ),
        ),
        spawns=((f"{exe.id}.payment", "order.payment", {"order": exe.id}),),
    )
    return exe.id


def main(env: Mapping[str, str] = os.environ) -> int:
    """Commit rounds at a steady rate until WORKLOAD_ROUNDS or SIGTERM/SIGINT."""
    store = RedisStore.from_url(
        env.get("WORKLOAD_REDIS_URL", "redis://redis:6379/0"), prefix=env.get("WORKLOAD_PREFIX", "stm")
    )
    interval_s = 1.0 / float(env.get("WORKLOAD_RATE", "5"))
    rounds = int(env.get("WORKLOAD_ROUNDS", "0"))
    rng = random.Random()
    stopping = False

    def stop(_signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    # A fresh run id per start keeps execution ids unique across restarts.
    run_id = f"{rng.getrandbits(32):08x}"
    committed = 0
    try:
        while not stopping and (rounds == 0 or committed < rounds):
            commit_round(store, run_id=run_id, round_no=committed, now_s=time.time(), rng=rng)
            committed += 1
            if committed % 100 == 0:
                print(f"workload committed={committed}", flush=True)
            time.sleep(interval_s)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(f"workload stopped committed={committed}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
