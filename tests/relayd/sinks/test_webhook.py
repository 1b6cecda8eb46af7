"""The webhook sink against a real HTTP server on 127.0.0.1: outcomes, signatures, order, timeouts."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import hmac
import socket
import threading
import time
from dataclasses import fields
from email.utils import formatdate
from typing import Any

import pytest
from support.http_server import Reply, Request, ScriptedServer, serve
from support.redis_server import free_port
from support.tls import make_pki, old_and_new_pki

from relayd.envelope.batch import Batch
from relayd.observability.inflight import InFlight
from relayd.security.material import Fixed, WatchedFile, pem_file, text_file
from relayd.security.watch import MaterialWatch
from relayd.sinks import DELIVERED, Permanent, Retry, SinkOptions, SinkSpec
from relayd.sinks.per_key import HELD_BACK
from relayd.sinks.webhook.http_policy import parse_header_lines
from relayd.sinks.webhook.options import WebhookOptions
from relayd.sinks.webhook.sink import WebhookSink

from .conftest import outbox

SECRET = b"webhook-signing-secret"
NOW_S = 1_750_000_000.0


def make_sink(url: str, **options: Any) -> WebhookSink:
    """A webhook sink; ``options`` named as ``WebhookOptions`` fields are its own, the rest common."""
    own_names = {field.name for field in fields(WebhookOptions)}
    own = WebhookOptions(**{name: value for name, value in options.items() if name in own_names})
    common = {name: value for name, value in options.items() if name not in own_names}
    return WebhookSink(SinkSpec("webhook", url), SinkOptions(own=own, **common), clock=lambda: NOW_S)


def verify_like_a_receiver(secret: bytes, headers: dict[str, str], body: bytes) -> bool:
    """The verification snippet of relayd.sinks.webhook.sink's docstring, written out independently."""
    timestamp = headers["X-Relayd-Timestamp"]
    expected = "v1=" + hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, headers["X-Relayd-Signature"])


async def test_503_is_retried_then_delivered_once_with_signed_requests() -> None:
    """A 503 is Retry; the redelivery gets 200 and is Delivered; every request is signed and keyed."""
    with serve(lambda body, nth: Reply(503 if nth == 1 else 200)) as server:
        sink = make_sink(server.url, secrets=Fixed((SECRET,)), signature="relayd")
        await sink.start()
        envelope = outbox("p", 1, "a")
        first = await sink.deliver(Batch.of([envelope]))
        second = await sink.deliver(Batch.of([envelope]))
        await sink.close()

    assert [Retry(error="http 503")] == list(first)
    assert list(second) == [DELIVERED]
    assert len(server.requests) == 2
    for request in server.requests:
        assert envelope.to_json() == request.raw
        assert request.headers["Content-Type"] == "application/json"
        assert request.headers["Idempotency-Key"] == "p:outbox:1"
        assert str(int(NOW_S)) == request.headers["X-Relayd-Timestamp"]
        assert verify_like_a_receiver(SECRET, request.headers, request.raw)
        assert not verify_like_a_receiver(b"wrong", request.headers, request.raw)


async def test_no_signature_headers_without_a_secret() -> None:
    """Without a signing secret only the idempotency key is sent (relayd scheme)."""
    with serve(lambda body, nth: Reply(204)) as server:
        sink = make_sink(server.url, signature="relayd")
        await sink.start()
        outcomes = await sink.deliver(Batch.of([outbox("p", 1, "a")]))
        await sink.close()

    assert list(outcomes) == [DELIVERED]
    assert "X-Relayd-Signature" not in server.requests[0].headers
    assert "X-Relayd-Timestamp" not in server.requests[0].headers
    assert server.requests[0].headers["Idempotency-Key"] == "p:outbox:1"


async def test_429_retry_after_seconds_is_returned() -> None:
    """A 429 with Retry-After: 7 is Retry(after_s=7)."""
    with serve(lambda body, nth: Reply(429, (("Retry-After", "7"),))) as server:
        sink = make_sink(server.url)
        await sink.start()
        outcomes = await sink.deliver(Batch.of([outbox("p", 1, "a")]))
        await sink.close()

    assert [Retry(error="http 429", after_s=7.0)] == list(outcomes)


async def test_503_retry_after_http_date_is_converted_to_seconds() -> None:
    """Retry-After as an HTTP-date becomes the seconds from the sink's clock."""
    header = formatdate(NOW_S + 30, usegmt=True)
    with serve(lambda body, nth: Reply(503, (("Retry-After", header),))) as server:
        sink = make_sink(server.url)
        await sink.start()
        outcomes = await sink.deliver(Batch.of([outbox("p", 1, "a")]))
        await sink.close()

    assert [Retry(error="http 503", after_s=30.0)] == list(outcomes)


async def test_statuses_map_to_outcomes() -> None:
    """400/404 are Permanent("http N"), 410 "endpoint gone"; 408/425/429/5xx are Retry; 201 Delivered."""
    statuses = [400, 404, 410, 408, 425, 429, 500, 502, 503, 504, 201]
    with serve(lambda body, nth: Reply(body["seq"])) as server:
        sink = make_sink(server.url)
        await sink.start()
        outcomes = await sink.deliver(Batch.of([outbox("p", status, f"t{status}") for status in statuses]))
        await sink.close()

    assert [
        Permanent("http 400"),
        Permanent("http 404"),
        Permanent("http 410 endpoint gone"),
        Retry(error="http 408"),
        Retry(error="http 425"),
        Retry(error="http 429"),
        Retry(error="http 500"),
        Retry(error="http 502"),
        Retry(error="http 503"),
        Retry(error="http 504"),
        DELIVERED,
    ] == list(outcomes)


async def test_hanging_server_times_out_into_retry() -> None:
    """A server that does not answer within the timeout gives Retry, in about the timeout."""
    with serve(lambda body, nth: Reply(200, delay_s=3.0)) as server:
        sink = make_sink(server.url, timeout=0.3)
        await sink.start()
        started = time.monotonic()
        outcomes = await sink.deliver(Batch.of([outbox("p", 1, "a")]))
        elapsed_s = time.monotonic() - started
        await sink.close()

    assert len(outcomes) == 1
    assert isinstance(outcomes[0], Retry)
    assert outcomes[0].error.startswith("webhook timeout")
    assert elapsed_s < 2.0


async def test_connection_refused_is_retry_and_not_ready_until_an_answer() -> None:
    """No server: every entry Retry, ready() false; the error names no host or port."""
    port = free_port()
    sink = make_sink(f"http://127.0.0.1:{port}/hook")
    await sink.start()

    outcomes = await sink.deliver(Batch.of([outbox("p", 1, "a"), outbox("p", 2, "b")]))

    assert not sink.ready()
    assert all(isinstance(o, Retry) and "connection error" in o.error for o in outcomes)
    assert all(str(port) not in o.error and "127.0.0.1" not in o.error for o in outcomes)  # type: ignore[union-attr]
    await sink.close()


async def test_ready_again_after_an_answer() -> None:
    """ready() turns true once a batch gets any HTTP answer, even an error status."""
    with serve(lambda body, nth: Reply(500)) as server:
        sink = make_sink(server.url)
        await sink.start()
        await sink.deliver(Batch.of([outbox("p", 1, "a")]))
        await sink.close()

    assert sink.ready()


async def test_failure_holds_back_later_entries_of_its_target_only() -> None:
    """After a's first entry fails, a's later entries are not sent; b flows."""
    with serve(lambda body, nth: Reply(500 if body["id"] == "p:outbox:1" else 200)) as server:
        sink = make_sink(server.url)
        await sink.start()
        batch = [outbox("p", 1, "a"), outbox("p", 2, "b"), outbox("p", 3, "a"), outbox("p", 4, "b")]
        outcomes = await sink.deliver(Batch.of(batch))
        await sink.close()

    assert [Retry(error="http 500"), DELIVERED, Retry(error=HELD_BACK), DELIVERED] == list(outcomes)
    assert sorted(r.body["id"] for r in server.requests) == ["p:outbox:1", "p:outbox:2", "p:outbox:4"]


async def test_slow_target_does_not_stall_others_and_order_holds_per_target() -> None:
    """The slow target's server holds its first answer until every fast request is in: the sink
    must send the fast targets' entries meanwhile; each target's requests arrive in seq order."""
    targets = ["slow", "f1", "f2", "f3", "f4"]
    batch = [outbox("p", n * len(targets) + i, t) for n in range(3) for i, t in enumerate(targets)]
    fast_count = sum(1 for e in batch if e.ordering_key != "slow")
    fast_all_in = threading.Event()
    fast_seen: list[str] = []

    def hold_slow(body: dict, nth: int) -> Reply:
        return Reply(200, hold=fast_all_in) if body["target_id"] == "slow" else Reply(200)

    def count_fast(request: Request) -> None:
        if request.body["target_id"] != "slow":
            fast_seen.append(request.body["id"])
            if len(fast_seen) == fast_count:
                fast_all_in.set()

    with serve(hold_slow, on_request=count_fast) as server:
        sink = make_sink(server.url, concurrency=8)
        await sink.start()
        outcomes = await sink.deliver(Batch.of(batch))
        await sink.close()

    assert [DELIVERED] * len(batch) == list(outcomes)
    assert fast_all_in.is_set()  # released by the fast requests, not by the hold's timeout
    answered = [r.body["target_id"] for r in server.requests]
    assert answered.index("slow") == fast_count  # no fast request waited behind the slow one
    for target in targets:
        arrived = [r.body["id"] for r in server.requests if r.body["target_id"] == target]
        assert [e.id for e in batch if e.ordering_key == target] == arrived


async def test_concurrency_is_bounded_by_the_option_over_a_pool_of_that_size() -> None:
    """With concurrency=2, never more than two requests in flight, over kept-alive connections."""
    with serve(lambda body, nth: Reply(200, delay_s=0.02)) as server:
        sink = make_sink(server.url, concurrency=2)
        await sink.start()
        outcomes = await sink.deliver(Batch.of([outbox("p", i, f"t{i}") for i in range(30)]))
        await sink.close()

    assert list(outcomes) == [DELIVERED] * 30
    assert 1 <= server.max_in_flight <= 2
    assert len({r.client_port for r in server.requests}) <= 2  # keep-alive: no connection per request


async def test_extra_headers_are_sent_and_gzip_bodies_verify_after_decompression() -> None:
    """Headers from the file reach the server; a gzip body decompresses to the signed JSON."""
    with serve(lambda body, nth: Reply(200)) as server:
        sink = make_sink(
            server.url,
            secrets=Fixed((SECRET,)),
            signature="relayd",
            headers=Fixed((("Authorization", "Bearer t0ken"), ("X-Tenant", "acme"))),
            gzip=True,
        )
        await sink.start()
        envelope = outbox("p", 1, "a")
        outcomes = await sink.deliver(Batch.of([envelope]))
        await sink.close()

    (request,) = server.requests
    assert list(outcomes) == [DELIVERED]
    assert (request.headers["Authorization"], request.headers["X-Tenant"]) == ("Bearer t0ken", "acme")
    assert request.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(request.raw) == envelope.to_json()
    assert verify_like_a_receiver(SECRET, request.headers, gzip.decompress(request.raw))


async def test_read_timeout_is_its_own_timeout() -> None:
    """A server that takes the request but does not answer trips the read timeout, not the total."""
    with serve(lambda body, nth: Reply(200, delay_s=3.0)) as server:
        sink = make_sink(server.url, timeout=60.0, read_timeout=0.2)
        await sink.start()
        outcomes = await sink.deliver(Batch.of([outbox("p", 1, "a")]))
        await sink.close()

    assert [Retry(error="webhook timeout (SocketTimeoutError)")] == list(outcomes)


async def test_connect_timeout_is_its_own_timeout() -> None:
    """A listener whose accept queue is full never completes the handshake: the connect timeout trips."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        for _ in range(8):  # fill the accept queue; later SYNs are dropped
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        try:
            sink = make_sink(f"http://127.0.0.1:{port}/hook", timeout=60.0, connect_timeout=0.3)
            await sink.start()
            outcomes = await sink.deliver(Batch.of([outbox("p", 1, "a")]))
            await sink.close()
        finally:
            for filler in fillers:
                filler.close()

    assert [Retry(error="webhook timeout (ConnectionTimeoutError)")] == list(outcomes)


async def test_https_is_verified_against_the_ca_file(tmp_path) -> None:
    """With the right CA file the request goes through; with another CA it never reaches the server."""
    pki = make_pki(tmp_path, now=dt.datetime.now(dt.UTC))
    with serve(lambda body, nth: Reply(200), tls=(pki.server_cert, pki.server_key)) as server:
        trusted = make_sink(server.url, ca_file=pki.ca_cert)
        untrusted = make_sink(server.url, ca_file=pki.wrong_ca_cert)
        for sink in (trusted, untrusted):
            await sink.start()
        delivered = await trusted.deliver(Batch.of([outbox("p", 1, "a")]))
        refused = await untrusted.deliver(Batch.of([outbox("p", 2, "a")]))
        for sink in (trusted, untrusted):
            await sink.close()

    assert list(delivered) == [DELIVERED]
    assert len(refused) == 1
    assert isinstance(refused[0], Retry)
    assert refused[0].error.startswith("webhook connection error")
    assert "127.0.0.1" not in refused[0].error
    assert [r.body["id"] for r in server.requests] == ["p:outbox:1"]


def test_server_helper_is_a_real_socket_server() -> None:
    """The helper binds loopback only."""
    server = ScriptedServer(lambda body, nth: Reply())
    try:
        assert server.httpd.server_address[0] == "127.0.0.1"
    finally:
        server.httpd.server_close()


async def test_a_rotated_ca_file_verifies_new_connections_from_the_next_batch(tmp_path) -> None:
    """The server moves to a certificate from a new CA; once the watched bundle holds the new CA,
    the same sink connects again (before, it refuses the server's new certificate)."""
    old, new = old_and_new_pki(tmp_path)
    bundle = tmp_path / "ca.crt"
    bundle.write_bytes(old.ca_cert.read_bytes())
    watched = pem_file("--webhook-ca-file", bundle)
    closing = Reply(200, headers=(("Connection", "close"),))  # every request on a new connection
    with serve(lambda body, nth: closing, tls=(old.server_cert, old.server_key)) as server:
        sink = make_sink(server.url, ca_file=bundle, ca=watched)
        await sink.start()
        before = await sink.deliver(Batch.of([outbox("p", 1, "a")]))
        server.httpd.socket.context.load_cert_chain(new.server_cert, new.server_key)  # type: ignore[attr-defined]
        refused = await sink.deliver(Batch.of([outbox("p", 2, "a")]))
        bundle.write_bytes(new.ca_cert.read_bytes())
        reloaded = watched.check()
        after = await sink.deliver(Batch.of([outbox("p", 3, "a")]))
        await sink.close()

    assert list(before) == [DELIVERED]
    assert isinstance(refused[0], Retry)
    assert reloaded == "reloaded"
    assert list(after) == [DELIVERED]
    assert [r.body["id"] for r in server.requests] == ["p:outbox:1", "p:outbox:3"]


class _RotatingHeaders:
    """A headers file's material whose content an operator rotates mid-run."""

    def __init__(self, value: tuple[tuple[str, str], ...]) -> None:
        self.value = value


async def test_a_rotated_headers_file_with_an_authorization_beside_oauth2_sends_nothing() -> None:
    """Allowed at start (OAuth2 and no Authorization line); the file then gains an Authorization
    header, which the token would replace: every entry is retried with the reason, no request
    and no grant goes out."""
    headers = _RotatingHeaders((("X-Tenant", "a"),))
    sink = make_sink(
        "http://127.0.0.1:9/h",
        headers=headers,
        oauth2_token_url="http://127.0.0.1:9/token",
        oauth2_client_id=Fixed("relayd"),
        oauth2_client_secret=Fixed("client-s3cret"),
    )
    await sink.start()
    headers.value = (("Authorization", "Bearer s3cret"),)
    outcomes = await sink.deliver(Batch.of([outbox("p", 1, "a"), outbox("p", 2, "b")]))
    await sink.close()

    assert len(outcomes) == 2
    for outcome in outcomes:
        assert isinstance(outcome, Retry)
        assert "an Authorization header in --webhook-headers-file; keep one" in outcome.error
        assert "s3cret" not in outcome.error


class CountingWatch:
    """A real ``MaterialWatch`` over ``files`` that counts the checks the sink asks for."""

    def __init__(self, *files: WatchedFile) -> None:
        self.watch = MaterialWatch(files)
        self.requested = 0

    def check_now(self) -> None:
        self.requested += 1
        self.watch.check_now()


@pytest.mark.parametrize("refusal", [401, 403])
async def test_a_refused_credential_has_the_files_read_again_at_once(tmp_path, refusal) -> None:
    """A 401 or 403 makes the sink ask for a check of the watched files right away (no periodic
    check runs here): the header file rotated before the refusal is sent by the next batch. A 200
    asks for no check."""
    headers = tmp_path / "headers"
    headers.write_text("Authorization: Bearer old\n")
    watched = text_file("--webhook-headers-file", headers, parse_header_lines)
    counting = CountingWatch(watched)
    replies = {"p:outbox:1": Reply(refusal), "p:outbox:2": Reply(200)}
    with serve(lambda body, nth: replies[body["id"]]) as server:
        sink = make_sink(server.url, headers=watched, check_material=counting.check_now)
        await sink.start()
        headers.write_text("Authorization: Bearer new\n")  # rotated; nothing has looked yet
        refused = await sink.deliver(Batch.of([outbox("p", 1, "a")]))
        requested_after_refusal = counting.requested
        delivered = await sink.deliver(Batch.of([outbox("p", 2, "a")]))
        await sink.close()

    assert isinstance(refused[0], Permanent | Retry)
    assert requested_after_refusal == 1
    assert list(delivered) == [DELIVERED]
    assert counting.requested == 1  # the 200 asked for nothing
    sent = [request.headers["Authorization"] for request in server.requests]
    assert sent == ["Bearer old", "Bearer new"]


async def test_a_failed_certificate_check_has_the_files_read_again_at_once(tmp_path) -> None:
    """The server moved to a certificate of a new CA and the bundle file already holds it: the
    failed verification asks for a check at once, and the next batch verifies with the new CA."""
    old, new = old_and_new_pki(tmp_path)
    bundle = tmp_path / "ca.crt"
    bundle.write_bytes(old.ca_cert.read_bytes())
    watched = pem_file("--webhook-ca-file", bundle)
    counting = CountingWatch(watched)
    with serve(lambda body, nth: Reply(200), tls=(new.server_cert, new.server_key)) as server:
        sink = make_sink(
            server.url,
            ca_file=bundle,
            ca=watched,
            check_material=counting.check_now,
        )
        await sink.start()
        bundle.write_bytes(new.ca_cert.read_bytes())  # rotated; nothing has looked yet
        refused = await sink.deliver(Batch.of([outbox("p", 1, "a")]))
        requested_after_refusal = counting.requested
        delivered = await sink.deliver(Batch.of([outbox("p", 2, "a")]))
        await sink.close()

    assert isinstance(refused[0], Retry)
    assert requested_after_refusal == 1
    assert list(delivered) == [DELIVERED]
    assert [r.body["id"] for r in server.requests] == ["p:outbox:2"]


async def test_each_request_that_ends_restarts_the_calls_liveness_deadline() -> None:
    """``relayd.observability.inflight``: a batch of many requests reports each one that ends (answered or
    not), so a long batch of answered requests is never taken for a hung call."""
    ticks = iter(range(1_000))
    inflight = InFlight(clock=lambda: float(next(ticks)))
    seen: list[float] = []
    with serve(lambda body, nth: Reply(500 if body["id"] == "p:outbox:2" else 200)) as server:
        sink = make_sink(server.url, concurrency=1)
        await sink.start()
        with inflight.track(sink) as call:
            real = sink._slots.release  # each request frees its slot once its progress is noted

            def noting_release() -> None:
                real()
                seen.append(call.progressed_s)

            sink._slots.release = noting_release  # type: ignore[method-assign]
            outcomes = await sink.deliver(Batch.of([outbox("p", seq, f"t{seq}") for seq in (1, 2, 3)]))
        await sink.close()

    assert sorted(map(str, outcomes)) == sorted(map(str, [DELIVERED, DELIVERED, Retry(error="http 500")]))
    assert call.timeout_s == 10.0  # --webhook-timeout's default: the sink's own
    assert len(seen) == 3
    assert seen == sorted(set(seen))  # renewed by every request, the failed one too
    assert seen[0] > call.started_s
