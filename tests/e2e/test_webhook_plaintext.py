"""Webhook credentials travel over plain HTTP to a host that is not loopback only with
``--allow-plaintext`` (a service mesh encrypting the hop): a real receiver on this machine's own
non-loopback address, a real redis-server with an entry due, and ``relayd sweep --once`` run as a
process. Refused configurations exit 2 with one line before any request; with the opt-in the
receiver gets the entry and its Authorization header, and relayd warns once, naming the host."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.http_server import Reply, ScriptedServer, serve

from relayd.errors import ConfigError
from relayd.sinks.webhook.transport import check_webhook_transport
from store import Event, Execution, Keyspace, RedisStore
from tests.e2e.conftest import run_relayd


def own_address() -> str:
    """This machine's address on its default route (not loopback): no packet is sent."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect(("198.51.100.1", 9))  # TEST-NET-2: only picks the route
        return str(sock.getsockname()[0])


@pytest.fixture
def receiver() -> Iterator[ScriptedServer]:
    """A receiver on every address (this machine's own among them), answering 200."""
    with serve(lambda body, nth: Reply(), host="0.0.0.0") as server:
        yield server


def _sweep_once(redis_url: str, prefix: str, sink: str, *extra: str):
    return run_relayd("sweep", "--once", "--redis-url", redis_url, "--prefix", prefix, "--sink", sink, *extra)


def test_credentials_over_plain_http_are_sent_only_with_allow_plaintext(
    redis_server, receiver: ScriptedServer, prefix: str, tmp_path: Path
) -> None:
    client = redis_server.client()
    RedisStore(client, prefix=prefix).commit(
        Execution(id="exe-1", definition_id="plain.flow"), [("t-1", Event(id="e-1", kind="ping", data={}))]
    )
    host = own_address()
    base = f"http://{host}:{receiver.port}/hook"
    with_user_info = f"http://user:s3cret@{host}:{receiver.port}/hook"
    headers_file = tmp_path / "headers"
    headers_file.write_text("Authorization: Bearer s3cret\n")
    headers = ("--webhook-headers-file", str(headers_file))

    url = redis_server.url
    refused = {
        "user info": _sweep_once(url, prefix, f"webhook:{with_user_info}"),
        "auth header": _sweep_once(url, prefix, f"webhook:{base}", *headers),
        "no opt-in": _sweep_once(url, prefix, f"webhook:{base}"),
        "both": _sweep_once(url, prefix, f"webhook:https://user:s3cret@{host}:1/hook", *headers),
    }
    untouched = client.hlen(Keyspace(prefix).outbox)
    meshed = _sweep_once(url, prefix, f"webhook:{base}", *headers, "--allow-plaintext")
    client.close()

    for case, result in refused.items():
        assert result.returncode == 2, (case, result.stderr[-2000:])
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, (case, result.stderr)
        assert lines[0].startswith("relayd: error: sink 'webhook': "), (case, lines)
        assert "s3cret" not in result.stderr
    assert "credentials over plaintext" in refused["user info"].stderr
    assert "credentials over plaintext" in refused["auth header"].stderr
    assert "--allow-plaintext where a service mesh encrypts the hop" in refused["auth header"].stderr
    assert "needs --allow-plaintext" in refused["no opt-in"].stderr
    assert "keep one" in refused["both"].stderr
    assert untouched == 1
    assert meshed.returncode == 0, meshed.stderr[-2000:]
    assert len(receiver.requests) == 1  # only the opted-in run reached the receiver
    assert receiver.requests[0].headers["Authorization"] == "Bearer s3cret"
    warnings = [line for line in meshed.stderr.splitlines() if "webhook_plaintext_credentials" in line]
    assert len(warnings) == 1, meshed.stderr[-2000:]
    assert host in warnings[0]
    assert "s3cret" not in meshed.stderr


@pytest.mark.parametrize(
    ("url", "headers", "allow"),
    [
        ("https://u:p@hooks.example.com/h", (), False),
        ("https://hooks.example.com/h", ("Authorization",), False),
        ("http://u:p@127.0.0.1:8080/h", (), False),
        ("http://localhost/h", ("X-Api-Key",), False),
        ("http://hooks.example.com/h", (), True),
        ("http://u:p@hooks.example.com/h", (), True),
        ("http://hooks.example.com/h", ("Authorization",), True),
    ],
)
def test_allowed_webhook_transports(url: str, headers: tuple[str, ...], allow: bool) -> None:
    check_webhook_transport(url, headers, allow_plaintext=allow)


@pytest.mark.parametrize(
    ("url", "headers", "allow", "says"),
    [
        ("http://u:p@hooks.example.com/h", (), False, "credentials over plaintext"),
        ("http://hooks.example.com/h", ("authorization",), False, "credentials over plaintext"),
        ("http://hooks.example.com/h", ("Cookie",), False, "credentials over plaintext"),
        ("http://hooks.example.com/h", (), False, "needs --allow-plaintext"),
        ("https://u:p@hooks.example.com/h", ("Authorization",), False, "keep one"),
    ],
)
def test_refused_webhook_transports(url: str, headers: tuple[str, ...], allow: bool, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as refused:
        check_webhook_transport(url, headers, allow_plaintext=allow)

    assert ":p@" not in str(refused.value)
