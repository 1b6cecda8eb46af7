"""store.codec.dumps: orjson's bytes, held at their own length."""

from __future__ import annotations

import tracemalloc

import orjson

from store.codec import dumps


def test_dumps_gives_orjsons_bytes_and_holds_only_their_length():
    """orjson returns its whole write buffer; ``dumps`` keeps a copy its size.

    Envelope JSON is cached and values wait in batches: a thousand kept must not hold a buffer each.
    """
    body = {"v": "relayd/1", "kind": "spawn", "id": "p:spawn:1", "context": {"n": 1}}
    assert dumps(body) == orjson.dumps(body)

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [dumps(body) for _ in range(1000)]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()

    assert len(kept) == 1000
    assert held < 1000 * 4 * len(dumps(body)), f"{held} bytes held by 1000 results"
