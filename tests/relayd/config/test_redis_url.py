"""The Redis URL policy: every topology's URL parsed, redaction, the loopback test, the plaintext rule."""

from __future__ import annotations

import pytest

from relayd.config.redis_url import (
    check_redis_url,
    is_loopback,
    parse_redis_url,
    plaintext_refusal,
    redact_url,
)
from relayd.errors import ConfigError
from store.urls import parse_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:6380/2", (False, False, "127.0.0.1", 6380, 2)),
        ("rediss://cache.example.com", (True, False, "cache.example.com", 6379, 0)),
        ("redis+cluster://10.0.0.1:7000", (False, True, "10.0.0.1", 7000, 0)),
        ("rediss+cluster://node.example.com:7001/0", (True, True, "node.example.com", 7001, 0)),
        ("redis://[::1]:6379", (False, False, "::1", 6379, 0)),
    ],
)
def test_parse_redis_url(url, expected):
    address = parse_redis_url(url)

    assert (address.tls, address.cluster, address.host, address.port, address.db) == expected


SENTINEL = [
    (
        "redis+sentinel://s1:26380,s2,[::1]:26381/mymaster/3",
        (False, (("s1", 26380), ("s2", 26379), ("::1", 26381)), "mymaster", 3),
    ),
    ("rediss+sentinel://u:p%40w@10.0.0.9/cache", (True, (("10.0.0.9", 26379),), "cache", 0)),
]


@pytest.mark.parametrize(("url", "expected"), SENTINEL, ids=[u for u, _ in SENTINEL])
def test_sentinel_urls_name_every_sentinel_the_service_and_the_db(url, expected):
    address = parse_redis_url(url)

    assert address.sentinel
    assert not address.cluster
    assert (address.tls, address.nodes, address.service, address.db) == expected


def test_sentinel_url_credentials_are_the_masters_and_stay_hidden():
    parsed = parse_url("rediss+sentinel://relay:p%40ss@10.0.0.9:26379,10.0.0.10:26379/cache")

    assert (parsed.username, parsed.password) == ("relay", "p@ss")
    assert parsed.display == "rediss+sentinel://***@10.0.0.9:26379,10.0.0.10:26379/cache"
    assert "p%40ss" not in repr(parsed)
    assert "p@ss" not in repr(parsed)  # the decoded password, the one a leak would show


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis+sentinel://s1:26379", "SERVICE_NAME"),
        ("redis+sentinel://s1:26379/m/x", "database must be a number"),
        ("redis+sentinel://s1:26379/m/1/2", "unexpected path"),
        ("redis+sentinel://s1:26379,s2:x/m", "bad port"),
        ("redis://a,b/0", "names several hosts"),
        ("redis+sentinel://:s3cret@/m", "has no host"),
    ],
)
def test_malformed_sentinel_urls_say_why_without_the_password(url, message):
    with pytest.raises(ValueError, match=message) as info:
        parse_redis_url(url)

    assert "s3cret" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("redis://u:p@h:1/0", "redis://***@h:1/0"),
        ("redis://h:1/0", "redis://h:1/0"),
        ("https://token@h/p?q=1", "https://***@h/p?q=1"),
        ("at redis://u:p@ss@h/0 and rediss://:x@k", "at redis://***@h/0 and rediss://***@k"),
        ("redis+sentinel://u:p@a:1,b:2/m", "redis+sentinel://***@a:1,b:2/m"),
    ],
)
def test_redact_url_hides_the_whole_user_information_of_every_url(text, expected):
    assert redact_url(text) == expected


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("127.9.9.9", True),
        ("::1", True),
        ("10.0.0.1", False),
        ("redis", False),
    ],
)
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("hosts", "tls", "credentials", "allow", "refused"),
    [
        (["127.0.0.1", "::1"], False, True, False, None),
        (["10.0.0.1"], True, True, False, None),
        (["10.0.0.1"], False, False, True, None),
        (["10.0.0.1"], False, False, False, "needs --allow-plaintext"),
        (["127.0.0.1", "10.0.0.2"], False, True, True, "refusing to send Redis credentials"),
    ],
)
def test_one_plaintext_rule_for_every_redis(hosts, tls, credentials, allow, refused):
    """Loopback and TLS pass; plaintext elsewhere needs the flag, and never with credentials."""
    reason = plaintext_refusal(hosts, tls=tls, credentials=credentials, allow_plaintext=allow)

    assert (reason is None) == (refused is None)
    assert refused is None or refused in str(reason)


def test_a_sentinel_destination_with_a_remote_sentinel_follows_the_plaintext_rule():
    with pytest.raises(ConfigError, match="needs --allow-plaintext"):
        check_redis_url("redis+sentinel://127.0.0.1:26379,10.0.0.3:26379/m", "harel", allow_plaintext=False)

    check_redis_url("redis+sentinel://127.0.0.1:26379,[::1]:26380/m", "harel", allow_plaintext=False)
