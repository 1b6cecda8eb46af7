"""``--webhook-batch N``: requests of up to N envelopes, one outcome each, per-key order kept,
signed over the whole body (verified with ``standardwebhooks``), CloudEvents batched mode read
back with the CloudEvents SDK."""

from __future__ import annotations

import base64

import orjson
import pytest
import standardwebhooks
from aiohttp import web
from cloudevents.core.formats.json import JSONFormat
from support.http_receiver import serve_on_this_loop

from relayd.envelope.batch import Batch
from relayd.security.material import Fixed
from relayd.sinks import DELIVERED, Retry, SinkOptions, SinkSpec
from relayd.sinks.per_key import HELD_BACK
from relayd.sinks.webhook.batches import batch_id, lanes
from relayd.sinks.webhook.options import WebhookOptions
from relayd.sinks.webhook.sink import WebhookSink

from .conftest import outbox

KEY = b"b" * 32
SECRET = "whsec_" + base64.b64encode(KEY).decode()


@pytest.mark.parametrize(("size", "max_lanes"), [(1, 4), (3, 2), (10, 16), (100, 16)])
def test_lanes_hold_every_entry_once_in_requests_of_at_most_size_with_each_key_in_one_lane(
    size: int, max_lanes: int
) -> None:
    keys = [f"k{n % 7}" if n % 5 else None for n in range(60)]

    planned = lanes(keys, size, max_lanes)

    flat = [index for lane in planned for request in lane for index in request]
    assert sorted(flat) == list(range(60))
    assert all(0 < len(request) <= size for lane in planned for request in lane)
    assert len(planned) <= max_lanes
    for lane in planned:
        in_lane = [index for request in lane for index in request]
        assert in_lane == sorted(in_lane)  # batch order, so each key's order
    lane_of_key = {
        keys[i]: n for n, lane in enumerate(planned) for request in lane for i in request if keys[i]
    }
    assert all(
        lane_of_key[keys[i]] == n for n, lane in enumerate(planned) for r in lane for i in r if keys[i]
    )


def test_a_batch_id_is_a_function_of_its_ids_in_order() -> None:
    assert batch_id(["a", "b"]) == batch_id(["a", "b"])
    assert batch_id(["a", "b"]) != batch_id(["b", "a"])
    assert batch_id(["a", "b"]) != batch_id(["a", "b", "c"])
    assert batch_id(["a"]).startswith("batch-")


async def test_requests_carry_up_to_n_envelopes_in_key_order_signed_over_the_whole_body() -> None:
    batch = [outbox("wb", seq, f"t{seq % 4}") for seq in range(1, 46)]
    received: list[tuple[dict[str, str], bytes]] = []

    async def receive(request: web.Request) -> web.Response:
        received.append((dict(request.headers), await request.read()))
        return web.Response(status=204)

    async with serve_on_this_loop(receive) as url:
        sink = WebhookSink(
            SinkSpec("webhook", url), SinkOptions(own=WebhookOptions(batch=10, secrets=Fixed((KEY,))))
        )
        await sink.start()
        outcomes = await sink.deliver(Batch.of(batch))
        await sink.close()

    assert list(outcomes) == [DELIVERED] * len(batch)
    posted = [orjson.loads(body)["data"] for _, body in received]
    assert sorted(envelope["id"] for request in posted for envelope in request) == sorted(e.id for e in batch)
    assert all(1 <= len(request) <= 10 for request in posted)
    assert len(received) < len(batch) // 4
    for headers, body in received:
        standardwebhooks.Webhook(SECRET).verify(body, headers)
        assert headers["webhook-id"] == batch_id([e["id"] for e in orjson.loads(body)["data"]])
        assert headers["Content-Type"] == "application/json"
    for target in {e.ordering_key for e in batch}:
        seqs = [e["seq"] for request in posted for e in request if e["target_id"] == target]
        assert seqs == sorted(seqs)


async def test_a_failed_request_is_one_outcome_for_its_entries_and_holds_back_the_rest_of_its_lane() -> None:
    """Two keys, two lanes: the request holding seq 3 gets a 503; the other key is unaffected."""
    batch = [outbox("wb", seq, "a" if seq <= 10 else "b") for seq in range(1, 21)]

    async def receive(request: web.Request) -> web.Response:
        seqs = [e["seq"] for e in orjson.loads(await request.read())["data"]]
        return web.Response(status=503 if 3 in seqs else 204)

    async with serve_on_this_loop(receive) as url:
        sink = WebhookSink(SinkSpec("webhook", url), SinkOptions(own=WebhookOptions(batch=4, concurrency=2)))
        await sink.start()
        outcomes = list(await sink.deliver(Batch.of(batch)))
        await sink.close()

    assert outcomes[:4] == [Retry(error="http 503")] * 4  # seqs 1-4: the failed request
    assert outcomes[4:10] == [Retry(error=HELD_BACK)] * 6  # the rest of key "a"'s lane
    assert outcomes[10:] == [DELIVERED] * 10


async def test_cloudevents_batches_are_json_arrays_the_sdk_reads() -> None:
    batch = [outbox("wb", seq, f"t{seq % 3}") for seq in range(1, 13)]
    received: list[tuple[dict[str, str], bytes]] = []

    async def receive(request: web.Request) -> web.Response:
        received.append((dict(request.headers), await request.read()))
        return web.Response(status=200)

    options = SinkOptions(own=WebhookOptions(batch=5, secrets=Fixed((KEY,))), output_format="cloudevents")
    async with serve_on_this_loop(receive) as url:
        sink = WebhookSink(SinkSpec("webhook", url), options)
        await sink.start()
        outcomes = await sink.deliver(Batch.of(batch))
        await sink.close()

    assert list(outcomes) == [DELIVERED] * len(batch)
    read = []
    for headers, body in received:
        assert headers["Content-Type"] == "application/cloudevents-batch+json"
        standardwebhooks.Webhook(SECRET).verify(body, headers)
        read += [JSONFormat().read(None, orjson.dumps(item)) for item in orjson.loads(body)]
    by_id = {event.get_id(): event for event in read}
    assert sorted(by_id) == sorted(e.id for e in batch)
    for envelope in batch:
        event = by_id[envelope.id]
        assert (event.get_type(), event.get_source()) == ("Ping", "relayd://wb")
        assert event.get_extension("sequence") == f"{envelope.body['seq']:020d}"
        assert event.get_extension("partitionkey") == envelope.ordering_key
        assert event.get_data() == envelope.body["event"]


async def test_case_1_a_request_refused_for_one_entry_is_split_until_that_entry_is_found() -> None:
    """A receiver answering 500 to any request carrying seq 7: every other entry is delivered,
    seq 7 alone gets the 500, the later entries of its target are held back."""
    batch = [outbox("wb", seq, f"t{seq % 4}") for seq in range(1, 41)]
    posted: list[list[int]] = []

    async def receive(request: web.Request) -> web.Response:
        seqs = [e["seq"] for e in orjson.loads(await request.read())["data"]]
        posted.append(seqs)
        return web.Response(status=500 if 7 in seqs else 204)

    async with serve_on_this_loop(receive) as url:
        sink = WebhookSink(SinkSpec("webhook", url), SinkOptions(own=WebhookOptions(batch=20, concurrency=1)))
        await sink.start()
        outcomes = list(await sink.deliver(Batch.of(batch)))
        await sink.close()

    by_seq = dict(zip(range(1, 41), outcomes, strict=True))
    assert by_seq[7] == Retry(error="http 500")
    held = [seq for seq in range(8, 41) if seq % 4 == 7 % 4]
    assert all(by_seq[seq] == Retry(error=HELD_BACK) for seq in held)
    assert all(by_seq[seq] == DELIVERED for seq in range(1, 41) if seq != 7 and seq not in held)
    assert len(posted) <= 2 + 5 + 2  # the two requests, the halving (log2 20), the rest re-formed


async def test_case_1_a_throttle_met_while_halving_stops_the_lane_and_blames_no_entry() -> None:
    """500 to the whole request and its first half, then 429 to one entry: the 429 is the
    receiver's state, not that entry's content, so it is Retry for that entry alone and the rest
    of the lane is held back, with no request after it."""
    batch = [outbox("wb", seq, f"t{seq}") for seq in range(1, 5)]
    posted: list[list[int]] = []

    async def receive(request: web.Request) -> web.Response:
        seqs = [e["seq"] for e in orjson.loads(await request.read())["data"]]
        posted.append(seqs)
        return web.Response(status=429 if seqs == [1] else 500)

    async with serve_on_this_loop(receive) as url:
        sink = WebhookSink(SinkSpec("webhook", url), SinkOptions(own=WebhookOptions(batch=4, concurrency=1)))
        await sink.start()
        outcomes = list(await sink.deliver(Batch.of(batch)))
        await sink.close()

    assert posted == [[1, 2, 3, 4], [1, 2], [1]]
    assert outcomes[0] == Retry(error="http 429")
    assert outcomes[1:] == [Retry(error=HELD_BACK)] * 3


async def test_case_1_a_receiver_refusing_everything_is_split_once_then_the_lane_stops() -> None:
    """A 500 to every request: one entry isolated, the rest refused whole, no more requests."""
    batch = [outbox("wb", seq, f"t{seq % 4}") for seq in range(1, 41)]
    posted: list[int] = []

    async def receive(request: web.Request) -> web.Response:
        posted.append(len(orjson.loads(await request.read())["data"]))
        return web.Response(status=500)

    async with serve_on_this_loop(receive) as url:
        sink = WebhookSink(SinkSpec("webhook", url), SinkOptions(own=WebhookOptions(batch=20, concurrency=1)))
        await sink.start()
        outcomes = list(await sink.deliver(Batch.of(batch)))
        await sink.close()

    assert posted == [20, 10, 5, 2, 1, 20]  # halved down to seq 1, then the rest re-formed once
    by_seq = dict(zip(range(1, 41), outcomes, strict=True))
    rest = [seq for seq in range(2, 41) if seq % 4 != 1][:20]  # seq 1's target held back behind it
    refused = [1, *rest]
    assert all(by_seq[seq] == Retry(error="http 500") for seq in refused)
    assert all(by_seq[seq] == Retry(error=HELD_BACK) for seq in range(1, 41) if seq not in refused)


async def test_case_1_a_refusal_that_does_not_repeat_parks_no_entry() -> None:
    """A 500 to the first request only: its halves are delivered, and the entry left by
    elimination is sent alone before it is blamed; it is delivered, so nothing is refused
    (before, the last entry was given the whole request's 500 without ever being sent alone)."""
    batch = [outbox("wb", seq, f"t{seq}") for seq in range(1, 5)]
    posted: list[list[int]] = []

    async def receive(request: web.Request) -> web.Response:
        seqs = [e["seq"] for e in orjson.loads(await request.read())["data"]]
        posted.append(seqs)
        return web.Response(status=500 if len(posted) == 1 else 204)

    async with serve_on_this_loop(receive) as url:
        sink = WebhookSink(SinkSpec("webhook", url), SinkOptions(own=WebhookOptions(batch=4, concurrency=1)))
        await sink.start()
        outcomes = list(await sink.deliver(Batch.of(batch)))
        await sink.close()

    assert posted == [[1, 2, 3, 4], [1, 2], [3], [4]]
    assert outcomes == [DELIVERED] * 4


async def test_case_1_entries_after_a_refused_half_go_on_when_the_refusal_does_not_repeat() -> None:
    """500 to the request and its first half, then 204s: the half's entries are delivered one by
    one, and the entries after that half are sent in the same call, not left behind."""
    batch = [outbox("wb", seq, f"t{seq}") for seq in range(1, 5)]
    posted: list[list[int]] = []

    async def receive(request: web.Request) -> web.Response:
        seqs = [e["seq"] for e in orjson.loads(await request.read())["data"]]
        posted.append(seqs)
        return web.Response(status=500 if len(posted) <= 2 else 204)

    async with serve_on_this_loop(receive) as url:
        sink = WebhookSink(SinkSpec("webhook", url), SinkOptions(own=WebhookOptions(batch=4, concurrency=1)))
        await sink.start()
        outcomes = list(await sink.deliver(Batch.of(batch)))
        await sink.close()

    assert posted == [[1, 2, 3, 4], [1, 2], [1], [2], [3, 4]]
    assert outcomes == [DELIVERED] * 4
