"""Sink spec parsing: every accepted form and one clear line for every malformed one."""

from __future__ import annotations

import pytest

from relayd.errors import ConfigError
from relayd.sinks.spec import SinkSpec, check_redis_url, parse_sink_spec, redact_url, sink_params

GOOD = [
    ("log", SinkSpec("log")),
    ("null", SinkSpec("null")),
    ("jsonl:/var/lib/relayd/out.jsonl", SinkSpec("jsonl", "/var/lib/relayd/out.jsonl")),
    ("jsonl:-", SinkSpec("jsonl", "-")),
    (
        "webhook:https://hooks.example.com/relay?x=1",
        SinkSpec("webhook", "https://hooks.example.com/relay?x=1"),
    ),
    ("webhook:http://127.0.0.1:8080/", SinkSpec("webhook", "http://127.0.0.1:8080/")),
    (
        "redis-stream:redis://127.0.0.1:6379/0?stream=ev:{target}&maxlen=100",
        SinkSpec("redis-stream", "redis://127.0.0.1:6379/0", {"stream": "ev:{target}", "maxlen": "100"}),
    ),
    (
        "redis-stream:rediss://h:6380/1?db=2&stream=s",
        SinkSpec("redis-stream", "rediss://h:6380/1?db=2", {"stream": "s"}),
    ),
    ("harel:redis://127.0.0.1:6379/0", SinkSpec("harel", "redis://127.0.0.1:6379/0")),
    (
        "harel:redis://a/0?store=redis://b/1&max_connections=8",
        SinkSpec("harel", "redis://a/0", {"store": "redis://b/1", "max_connections": "8"}),
    ),
    ("python:my_pkg.sinks:make", SinkSpec("python", "my_pkg.sinks:make")),
    ("python:m:f?level=3", SinkSpec("python", "m:f", {"level": "3"})),
    ("testsink:anything:at/all", SinkSpec("testsink", "anything:at/all")),
    ("kafka", SinkSpec("kafka")),
]


@pytest.mark.parametrize(("text", "expected"), GOOD, ids=[t for t, _ in GOOD])
def test_good_specs_parse(text: str, expected: SinkSpec) -> None:
    """Every documented form parses into its scheme, target and params."""
    actual = parse_sink_spec(text)

    assert expected == actual


BAD = [
    ("", "empty sink spec"),
    ("  ", "empty sink spec"),
    ("log:extra", "takes no argument"),
    ("null:x", "takes no argument"),
    ("jsonl", "needs a path"),
    ("jsonl:", "needs a path"),
    ("webhook", "needs a URL"),
    ("webhook:ftp://h/x", "http:// or https://"),
    ("webhook:https://", "malformed URL"),
    ("webhook:http://h:notaport/", "malformed URL"),
    ("redis-stream:redis://h/0", "needs a stream name"),
    ("redis-stream:redis://h/0?stream=", "needs a stream name"),
    ("redis-stream:redis://h/0?stream=s&maxlen=0", "maxlen must be a positive integer"),
    ("redis-stream:redis://h/0?stream=s&maxlen=ten", "maxlen must be a positive integer"),
    ("redis-stream:http://h/0?stream=s", "redis:// or rediss://"),
    ("harel", "needs a URL"),
    ("harel:redis://h/0?max_connections=-1", "max_connections must be a positive integer"),
    ("harel:redis://h/0?store=http://x", "store URL"),
    ("python:nomodule", "python:package.module:factory"),
    ("python:pkg.mod:", "python:package.module:factory"),
    ("python:pkg-x.mod:f", "python:package.module:factory"),
    ("9lives", "must start with a sink name"),
    ("web hook:x", "must start with a sink name"),
]


@pytest.mark.parametrize(("text", "message"), BAD, ids=[t or "<empty>" for t, _ in BAD])
def test_malformed_specs_raise_one_clear_line(text: str, message: str) -> None:
    """A malformed spec is a ConfigError whose single line says what is wrong."""
    with pytest.raises(ConfigError) as info:
        parse_sink_spec(text)

    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_no_password_in_errors_or_reprs() -> None:
    """A URL password never shows in a parse error, a spec's str or its repr."""
    with pytest.raises(ConfigError) as info:
        parse_sink_spec("redis-stream:redis://user:s3cret@h:6379/0")
    spec = parse_sink_spec("redis-stream:redis://user:s3cret@h:6379/0?stream=s")

    assert "s3cret" not in str(info.value)
    assert "s3cret" not in str(spec)
    assert "s3cret" not in repr(spec)
    assert str(spec) == "redis-stream:redis://***@h:6379/0?stream=s"


def test_redact_url_keeps_urls_without_credentials() -> None:
    """The user information goes whole (relayd.config.redis_url); a URL without one is unchanged."""
    assert redact_url("redis://h:1/0") == "redis://h:1/0"
    assert redact_url("https://u:pw@h/p?q=1") == "https://***@h/p?q=1"


POLICY = [
    ("redis://127.0.0.1:6379/0", False, None),
    ("redis://localhost/0", False, None),
    ("redis://[::1]:6379/0", False, None),
    ("redis://:pw@127.0.0.1/0", False, None),
    ("rediss://:pw@cache.example.com/0", False, None),
    ("unix:///tmp/redis.sock", False, None),
    ("redis://cache.example.com/0", True, None),
    ("redis://cache.example.com/0", False, "needs --allow-plaintext"),
    ("redis://:pw@cache.example.com/0", True, "credentials over plaintext"),
    ("rediss://cache.example.com/0?ssl_cert_reqs=none", False, "TLS options in the URL"),
]


@pytest.mark.parametrize(("url", "allow", "message"), POLICY, ids=[f"{u}-{a}" for u, a, _ in POLICY])
def test_destination_redis_urls_follow_the_plaintext_policy(
    url: str, allow: bool, message: str | None
) -> None:
    """README.md#security: loopback and TLS pass; plaintext elsewhere needs the flag; never credentials."""
    if message is None:
        check_redis_url(url, "redis-stream", allow_plaintext=allow)
        return
    with pytest.raises(ConfigError, match=message) as info:
        check_redis_url(url, "redis-stream", allow_plaintext=allow)

    assert "pw" not in str(info.value)


def test_sink_params_splits_the_target_from_the_parameters_it_knows() -> None:
    assert sink_params("q.fifo?region=eu-west-1", "sqs", ("region",)) == ("q.fifo", {"region": "eu-west-1"})
    assert sink_params("h:1", "kafka", ("topic",)) == ("h:1", {})


@pytest.mark.parametrize("note", ["", "a hint"])
def test_sink_params_refuses_an_unknown_parameter_in_one_line_naming_the_known(note: str) -> None:
    with pytest.raises(ConfigError) as info:
        sink_params("h:1?topic=t&acks=1", "kafka", ("topic", "tls"), note=note)

    expected = "sink 'kafka': unknown parameter 'acks' (known: topic, tls" + (f"; {note})" if note else ")")
    assert str(info.value) == expected
