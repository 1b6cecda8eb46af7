"""Settings: defaults, precedence, prefix ranges, URL parsing and the DESIGN §7 security rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from relayd.errors import ConfigError
from relayd.settings import (
    expand_prefixes,
    is_loopback,
    load_settings,
    parse_host_port,
    parse_redis_url,
    redact_url,
)


def test_defaults_map_onto_sweep_and_sink_options():
    """With nothing configured, the documented defaults reach the engine and the sinks."""
    settings = load_settings()

    options = settings.sweep_options(once=True)
    sink_options = settings.sink_options()

    assert options.prefixes == ("stm",)
    assert (options.batch, options.poll_interval_s, options.max_attempts) == (1000, 1.0, 10)
    assert (options.lease_ttl_s, options.shutdown_grace_s, options.once) == (5.0, 10.0, True)
    assert settings.metrics_addr == "127.0.0.1:9464"
    assert settings.sink_specs() == {"spawn": "log", "outbox": "log", "timer": "log"}
    assert sink_options.webhook_secret is None
    assert (sink_options.webhook_timeout_s, sink_options.webhook_concurrency) == (10.0, 16)


def test_flags_win_over_env_and_env_over_defaults(monkeypatch: pytest.MonkeyPatch):
    """A keyword (a flag typed on the command line) beats RELAYD_*, which beats the default."""
    monkeypatch.setenv("RELAYD_BATCH", "5")
    monkeypatch.setenv("RELAYD_POLL_INTERVAL", "0.25")

    settings = load_settings(batch=7)

    assert settings.batch == 7
    assert settings.poll_interval == 0.25
    assert settings.max_attempts == 10


def test_env_prefix_is_comma_separated_and_ranges_expand(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RELAYD_PREFIX", "stm, harel,{shard-0..2}")

    settings = load_settings()

    assert settings.prefix == ("stm", "harel", "{shard-0}", "{shard-1}", "{shard-2}")


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["{shard-0..31}"], tuple(f"{{shard-{n}}}" for n in range(32))),
        (["app{s3..4x}"], ("app{s3x}", "app{s4x}")),
        (["a", "a,b"], ("a", "b")),
        (["{stm}"], ("{stm}",)),
    ],
    ids=["32-shards", "text-around", "duplicates-dropped", "plain-hash-tag"],
)
def test_expand_prefixes(values, expected):
    assert expand_prefixes(values) == expected


@pytest.mark.parametrize("values", [["{s-5..1}"], ["{s-0..5000}"], [""], ["a b"]], ids=str)
def test_expand_prefixes_rejects(values):
    with pytest.raises(ValueError, match=r"prefix"):
        expand_prefixes(values)


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


@pytest.mark.parametrize(
    "url",
    [
        "http://h",
        "unix:///tmp/redis.sock",
        "redis://",
        "redis://h:99999",
        "redis://h/abc",
        "redis+cluster://h/3",
        "redis://h/0?ssl_cert_reqs=none",
        "not a url",
    ],
)
def test_malformed_redis_url_is_a_config_error(url):
    with pytest.raises(ConfigError, match=r"redis"):
        load_settings(redis_url=url, allow_plaintext=True)


def test_url_credentials_never_appear_in_errors_or_display():
    address = parse_redis_url("rediss://user:s3cret-pw@cache.example.com/0")

    with pytest.raises(ConfigError) as excinfo:
        load_settings(redis_url="redis://user:s3cret-pw@cache.example.com/x")

    assert address.password is not None
    assert address.password.get_secret_value() == "s3cret-pw"
    assert "s3cret-pw" not in address.display
    assert "s3cret-pw" not in repr(address)
    assert "s3cret-pw" not in str(excinfo.value)
    assert redact_url("redis://u:p@h:1/0") == "redis://***@h:1/0"


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


def test_credentials_come_from_files_and_win_over_the_url(tmp_path: Path):
    user, password = tmp_path / "user", tmp_path / "password"
    user.write_text("relay\n")
    password.write_text("from-file\n")

    settings = load_settings(
        redis_url="redis://urluser:from-url@127.0.0.1/0",
        redis_username_file=user,
        redis_password_file=password,
    )

    username, secret = settings.redis_credentials
    assert username == "relay"
    assert secret is not None
    assert secret.get_secret_value() == "from-file"
    assert set(settings.secrets()) == {"from-file", "from-url"}
    assert "from-file" not in repr(settings)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"redis_url": "redis://10.0.0.1:6379"}, "needs --allow-plaintext"),
        (
            {"redis_url": "redis://:pw@10.0.0.1:6379", "allow_plaintext": True},
            "refusing to send Redis credentials",
        ),
        ({"redis_url": "redis+cluster://10.0.0.1:7000"}, "needs --allow-plaintext"),
        ({"redis_password_file": "PASSWORD", "redis_url": "redis://10.0.0.1"}, "refusing to send"),
        ({"redis_password_file": "/nonexistent/password"}, "--redis-password-file: cannot read"),
        ({"redis_username_file": "/nonexistent/user"}, "--redis-username-file: cannot read"),
        ({"webhook_secret_file": "/nonexistent/secret"}, "--webhook-secret-file: cannot read"),
        ({"redis_password_file": "EMPTY"}, "is empty"),
        ({"redis_url": "rediss://h", "redis_ca_file": "/nonexistent/ca.pem"}, "--redis-ca-file"),
        ({"redis_url": "rediss://h", "redis_cert_file": "PASSWORD"}, "go together"),
        ({"redis_ca_file": "PASSWORD"}, "use rediss://"),
    ],
    ids=[
        "plaintext-remote",
        "url-credentials-plaintext-remote",
        "plaintext-remote-cluster",
        "file-credentials-plaintext-remote",
        "missing-password-file",
        "missing-username-file",
        "missing-webhook-secret",
        "empty-password-file",
        "missing-ca-file",
        "cert-without-key",
        "ca-file-on-plaintext",
    ],
)
def test_security_rules(tmp_path: Path, kwargs, message):
    """Every DESIGN §7 refusal is a ConfigError naming the option, never a file's content."""
    (tmp_path / "PASSWORD").write_text("hunter2\n")
    (tmp_path / "EMPTY").write_text("\n")
    resolved = {
        k: (str(tmp_path / v) if isinstance(v, str) and v in ("PASSWORD", "EMPTY") else v)
        for k, v in kwargs.items()
    }

    with pytest.raises(ConfigError) as excinfo:
        load_settings(**resolved)

    assert message in str(excinfo.value)
    assert "hunter2" not in str(excinfo.value)
    assert "\n" not in str(excinfo.value)


def test_plaintext_to_remote_host_is_allowed_with_the_opt_in():
    settings = load_settings(redis_url="redis://10.0.0.1:6379/0", allow_plaintext=True)

    assert settings.redis.host == "10.0.0.1"


def test_webhook_secret_reaches_sink_options(tmp_path: Path):
    secret = tmp_path / "secret"
    secret.write_text("sign-me\n")

    settings = load_settings(webhook_secret_file=secret, webhook_concurrency=4)

    assert settings.sink_options().webhook_secret == b"sign-me"
    assert settings.sink_options().webhook_concurrency == 4
    assert "sign-me" in settings.secrets()


def test_webhook_options_reach_sink_options_and_header_values_are_secrets(tmp_path: Path):
    headers = tmp_path / "headers"
    headers.write_text("# mounted from a Secret\nAuthorization: Bearer s3cr3t\n\nX-Tenant:  acme \n")

    settings = load_settings(
        webhook_headers_file=headers,
        webhook_gzip=True,
        webhook_connect_timeout=1.5,
        webhook_read_timeout=4.0,
    )
    options = settings.sink_options()

    assert options.webhook_headers == (("Authorization", "Bearer s3cr3t"), ("X-Tenant", "acme"))
    assert (options.webhook_gzip, options.webhook_connect_timeout_s, options.webhook_read_timeout_s) == (
        True,
        1.5,
        4.0,
    )
    assert "Bearer s3cr3t" in settings.secrets()  # redacted from every log line
    assert "s3cr3t" not in repr(options)


def test_per_kind_sinks_default_to_sink():
    settings = load_settings(sink="jsonl:/tmp/x.jsonl", timer_sink="log")

    assert settings.sink_specs() == {
        "spawn": "jsonl:/tmp/x.jsonl",
        "outbox": "jsonl:/tmp/x.jsonl",
        "timer": "log",
    }


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"batch": 0}, "--batch"),
        ({"poll_interval": -1}, "--poll-interval"),
        ({"max_attempts": 0}, "--max-attempts"),
        ({"lease_ttl": 0}, "--lease-ttl"),
        ({"log_format": "xml"}, "--log-format"),
        ({"log_level": "loud"}, "--log-level"),
        ({"metrics_addr": "9464"}, "--metrics-addr"),
        ({"sink": " "}, "--sink"),
    ],
)
def test_invalid_values_name_their_option_and_env_var(kwargs, option):
    with pytest.raises(ConfigError) as excinfo:
        load_settings(**kwargs)

    assert str(excinfo.value).startswith(f"invalid {option} (RELAYD_")


@pytest.mark.parametrize(
    ("addr", "expected"),
    [("127.0.0.1:9464", ("127.0.0.1", 9464)), ("0.0.0.0:0", ("0.0.0.0", 0)), ("[::1]:80", ("::1", 80))],
)
def test_parse_host_port(addr, expected):
    assert parse_host_port(addr) == expected


def test_log_format_and_level_are_case_insensitive(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RELAYD_LOG_LEVEL", "DEBUG")

    settings = load_settings(log_format="JSON")

    assert (settings.log_format, settings.log_level) == ("json", "debug")
