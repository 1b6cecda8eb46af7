"""``relayd sweep --once`` into SQS (FIFO and standard), SNS and Kinesis on a real moto server.

Each case drains about a hundred entries harel's own store committed (outbox to several
targets, spawns, due timers); every envelope must arrive as its ``relayd/1`` JSON with its
attributes, FIFO order per group must hold, and the backlog must be empty afterwards.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson
import pytest
from support.harel_backlog import assert_backlog_empty, commit_harel_backlog, order_violations
from support.moto import AWS_ENV, MotoServer, kinesis_records, receive_all, subscribe_queue
from support.redis_server import RedisServer

from relayd.sinks.aws.entries import fifo_token
from tests.e2e.conftest import run_relayd

pytestmark = pytest.mark.slow

CASES = ["sqs-fifo", "sqs-standard", "sns-fifo", "kinesis"]


def destination(moto: MotoServer, case: str) -> tuple[str, Any]:
    """Create the case's destination; return the sink spec and how to read it back."""
    name = f"e2e{uuid.uuid4().hex[:8]}"
    if case.startswith("sqs"):
        url = moto.create("sqs", name, fifo=case.endswith("fifo"))
        return moto.spec("sqs", url), lambda: receive_all(moto.client("sqs"), url)
    if case == "sns-fifo":
        arn = moto.create("sns", name, fifo=True)
        queue = subscribe_queue(moto, arn, f"{name}-sub", fifo=True)
        return moto.spec("sns", arn), lambda: receive_all(moto.client("sqs"), queue)
    stream = moto.create("kinesis", name)
    return moto.spec("kinesis", stream), lambda: kinesis_records(moto, stream)


@pytest.mark.parametrize("case", CASES)
def test_sweep_once_delivers_a_harel_backlog_with_attributes_and_fifo_order(
    case: str, redis_server: RedisServer, moto_server: MotoServer, prefix: str
) -> None:
    client = redis_server.client()
    backlog = commit_harel_backlog(client, prefix, executions=12, emits=5)
    spec, read = destination(moto_server, case)

    result = run_relayd(
        "sweep", "--once", "--redis-url", redis_server.url, "--prefix", prefix, "--sink", spec, env=AWS_ENV
    )

    assert result.returncode == 0, result.stderr[-2000:]
    assert "127.0.0.1:" + str(moto_server.port) not in result.stderr  # the endpoint is never logged
    received = read()
    if case == "kinesis":
        envelopes = [orjson.loads(data) for _, data in received]
        ordering_key = {"outbox": "target_id", "spawn": "child_id", "timer": "execution_id"}
        for (key, _), envelope in zip(received, envelopes, strict=True):
            assert key == (envelope[ordering_key[envelope["kind"]]] or envelope["id"])
    else:
        envelopes = [orjson.loads(m.body) for m in received]
        assert [m.attributes for m in received] == [
            {"relayd-id": e["id"], "relayd-kind": e["kind"]} for e in envelopes
        ]
        if case.endswith("fifo"):
            assert all(m.dedup_id == fifo_token(e["id"]) for m, e in zip(received, envelopes, strict=True))
    assert sorted(e["id"] for e in envelopes) == sorted(backlog.due)
    assert len(backlog.due) >= 90
    assert {e["v"] for e in envelopes} == {"relayd/1"}
    if case != "sqs-standard":  # a standard queue promises no order
        assert order_violations(envelopes) == []
    assert_backlog_empty(client, backlog)
