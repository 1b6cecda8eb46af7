"""Settings: defaults, precedence, prefix ranges, URL parsing and the security rules of README.md#security."""

from __future__ import annotations

from pathlib import Path

import pytest

from relayd.config.defaults import DEFAULTS, OPTION_NAMES
from relayd.config.host_port import parse_host_port
from relayd.config.prefixes import expand_prefixes
from relayd.config.redis_url import parse_redis_url
from relayd.config.settings import NO_SINK_HINT, Settings, load_settings
from relayd.errors import ConfigError
from relayd.sinks.amqp.options import AmqpOptions
from relayd.sinks.webhook.options import WebhookOptions

pytestmark = pytest.mark.usefixtures("no_relayd_env", "reset_logging")


def _mounted(directory: Path, **contents: str) -> dict[str, Path]:
    """Files as a Kubernetes Secret mounts them (each value and a newline), by name."""
    files = {name: directory / name for name in contents}
    for name, path in files.items():
        path.write_text(f"{contents[name]}\n")
    return files


def test_settings_declares_every_option_with_its_documented_default():
    """An option in ``relayd.config.defaults`` (and so on the CLI) but not in Settings would be dropped."""
    declared = {name: field.default for name, field in Settings.model_fields.items()}

    assert set(declared) == OPTION_NAMES
    assert {name: declared[name] for name in OPTION_NAMES} == {
        name: getattr(DEFAULTS, name) for name in OPTION_NAMES
    }


def test_defaults_map_onto_sweep_and_sink_options():
    """With nothing configured, the documented defaults reach the engine and the sinks."""
    settings = load_settings()

    options = settings.sweep_options(once=True)
    sink_options = settings.sink_options()

    assert options.prefixes == ("stm",)
    assert (options.batch, options.poll_interval_s, options.max_attempts) == (1000, 1.0, 10)
    assert (options.lease_ttl_s, options.shutdown_grace_s, options.once) == (5.0, 10.0, True)
    assert settings.metrics_addr == "127.0.0.1:9464"
    assert settings.sink is None  # no sink by default: a sweep must name one (sink_specs refuses)
    webhook = settings.own_options(WebhookOptions)
    assert webhook.secrets is None
    assert (webhook.timeout, webhook.concurrency) == (10.0, 16)
    assert sink_options.own is None  # a sink's own options reach it alone (resolve_sink)


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


def test_a_prefix_flag_replaces_the_env_list_and_is_split_too(monkeypatch: pytest.MonkeyPatch):
    """Repeated --prefix values (a list, as the CLI passes them) win over RELAYD_PREFIX whole."""
    monkeypatch.setenv("RELAYD_PREFIX", "from-env,{other-0..1}")

    settings = load_settings(prefix=["a", "b,{c-0..1}"])

    assert settings.prefix == ("a", "b", "{c-0}", "{c-1}")


def test_env_prefix_is_text_not_json(monkeypatch: pytest.MonkeyPatch):
    """pydantic-settings decodes list variables as JSON by default; RELAYD_PREFIX stays text."""
    monkeypatch.setenv("RELAYD_PREFIX", "a,b")

    assert load_settings().prefix == ("a", "b")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", True),
        ("1", True),
        ("yes", True),
        ("ON", True),
        ("false", False),
        ("0", False),
        ("off", False),
    ],
)
def test_env_switches_read_the_usual_words(monkeypatch: pytest.MonkeyPatch, value: str, expected: bool):
    monkeypatch.setenv("RELAYD_WAKE", value)
    monkeypatch.setenv("RELAYD_WEBHOOK_GZIP", value)

    settings = load_settings()

    assert (settings.wake, settings.own_options(WebhookOptions).gzip) == (expected, expected)


def test_env_variable_names_are_case_insensitive_and_other_relayd_variables_are_ignored(
    monkeypatch: pytest.MonkeyPatch,
):
    """``relayd_batch`` counts; RELAYD_ONCE and RELAYD_JSON belong to commands, not Settings."""
    monkeypatch.setenv("relayd_batch", "9")
    monkeypatch.setenv("RELAYD_ONCE", "1")
    monkeypatch.setenv("RELAYD_JSON", "1")

    assert load_settings().batch == 9


@pytest.mark.parametrize(
    ("variable", "value", "option"),
    [
        ("RELAYD_BATCH", "many", "--batch"),
        ("RELAYD_LEASE_TTL", "0.1", "--lease-ttl"),
        ("RELAYD_WAKE", "maybe", "--wake"),
        ("RELAYD_PREFIX", "{s-9..1}", "--prefix"),
    ],
)
def test_a_bad_env_value_names_its_option_and_variable_on_one_line(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, option: str
):
    monkeypatch.setenv(variable, value)

    with pytest.raises(ConfigError) as excinfo:
        load_settings()

    assert str(excinfo.value).startswith(f"invalid {option} ({variable}): ")
    assert "\n" not in str(excinfo.value)


def test_an_unknown_keyword_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown option 'bogus'"):
        load_settings(bogus=1)


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


def test_credentials_come_from_files_and_win_over_the_url(tmp_path: Path):
    files = _mounted(tmp_path, user="relay", password="from-file")

    settings = load_settings(
        redis_url="redis://urluser:from-url@127.0.0.1/0",
        redis_username_file=files["user"],
        redis_password_file=files["password"],
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
    """Every README.md#security refusal is a ConfigError naming the option, never a file's content."""
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
    files = _mounted(tmp_path, secret="whsec_c2lnbi1tZQ==")

    settings = load_settings(webhook_secret_file=files["secret"], webhook_concurrency=4)

    webhook = settings.own_options(WebhookOptions)
    assert webhook.secrets is not None
    assert webhook.secrets.value == (b"sign-me",)
    assert webhook.concurrency == 4
    assert "whsec_c2lnbi1tZQ==" in settings.secrets()


def test_webhook_options_reach_sink_options_and_header_values_are_secrets(tmp_path: Path):
    headers = tmp_path / "headers"
    headers.write_text("# mounted from a Secret\nAuthorization: Bearer s3cr3t\n\nX-Tenant:  acme \n")

    settings = load_settings(
        webhook_headers_file=headers,
        webhook_gzip=True,
        webhook_connect_timeout=1.5,
        webhook_read_timeout=4.0,
    )
    options = settings.own_options(WebhookOptions)

    assert options.headers is not None
    assert options.headers.value == (("Authorization", "Bearer s3cr3t"), ("X-Tenant", "acme"))
    assert (options.gzip, options.connect_timeout, options.read_timeout) == (
        True,
        1.5,
        4.0,
    )
    assert "Bearer s3cr3t" in settings.secrets()  # redacted from every log line
    assert "s3cr3t" not in repr(options)


def test_a_kind_without_a_sink_is_one_config_error_with_the_hint():
    """No default sink: a sweep without one would otherwise ack its backlog into the log."""
    with pytest.raises(ConfigError) as info:
        load_settings(outbox_sink="null").sink_specs()

    assert str(info.value) == f"no sink for spawn, timer entries: {NO_SINK_HINT}"


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


def test_sentinel_credentials_come_from_their_own_files(tmp_path: Path):
    """The URL's (or --redis-*-file) credentials are the master's; the sentinels' are their own."""
    files = _mounted(tmp_path, user="sentinel-reader", password="s-pw")

    settings = load_settings(
        redis_url="redis+sentinel://:m-pw@127.0.0.1:26379,127.0.0.1:26380/cache/2",
        sentinel_username_file=files["user"],
        sentinel_password_file=files["password"],
    )

    sentinel_user, sentinel_password = settings.sentinel_credentials
    assert sentinel_user == "sentinel-reader"
    assert sentinel_password is not None
    assert sentinel_password.get_secret_value() == "s-pw"
    assert settings.redis_credentials[1] is not None
    assert settings.redis_credentials[1].get_secret_value() == "m-pw"
    assert (settings.redis.service, settings.redis.db) == ("cache", 2)
    assert set(settings.secrets()) == {"m-pw", "s-pw"}
    assert settings.sink_options().sentinel_password == "s-pw"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"redis_url": "redis://127.0.0.1", "sentinel_password_file": "PASSWORD"}, "is for a redis"),
        (
            {
                "redis_url": "redis+sentinel://127.0.0.1:26379,10.0.0.7:26379/m",
                "sentinel_password_file": "PASSWORD",
            },
            "refusing to send Redis credentials",
        ),
        ({"redis_url": "redis+sentinel://10.0.0.7:26379/m"}, "needs --allow-plaintext"),
        ({"redis_url": "redis+sentinel://127.0.0.1:26379"}, "SERVICE_NAME"),
    ],
)
def test_sentinel_urls_follow_the_same_rules(kwargs, message, tmp_path: Path):
    password = tmp_path / "password"
    password.write_text("s-pw")
    resolved = {k: (password if v == "PASSWORD" else v) for k, v in kwargs.items()}

    with pytest.raises(ConfigError, match=message) as info:
        load_settings(**resolved)

    assert "s-pw" not in str(info.value)


def test_amqp_password_file_and_ca_reach_sink_options_and_are_redacted(tmp_path: Path):
    """The password is read from its file, is a secret for log redaction, and is not in a repr."""
    files = _mounted(tmp_path, password="rabbit-pw", ca="-----BEGIN CERTIFICATE-----")

    settings = load_settings(amqp_password_file=files["password"], amqp_ca_file=files["ca"])
    options = settings.own_options(AmqpOptions)

    assert options.password is not None
    assert options.password.value == "rabbit-pw"
    assert options.ca_file == files["ca"]
    assert "rabbit-pw" in settings.secrets()
    assert "rabbit-pw" not in repr(options)


def test_redis_and_webhook_ca_files_reach_sink_options_as_paths(tmp_path: Path):
    ca = _mounted(tmp_path, ca="-----BEGIN CERTIFICATE-----")["ca"]

    settings = load_settings(redis_url="rediss://127.0.0.1/0", redis_ca_file=ca, webhook_ca_file=ca)
    options = settings.sink_options()

    assert (options.redis_ca_file, settings.own_options(WebhookOptions).ca_file) == (str(ca), ca)
    assert options.sentinel_password is None
    assert settings.own_options(AmqpOptions).password is None


def test_an_unreadable_amqp_password_file_is_a_config_error_naming_the_option(tmp_path: Path):
    with pytest.raises(ConfigError, match="--amqp-password-file: cannot read"):
        load_settings(amqp_password_file=tmp_path / "missing")


def test_the_type_checker_sees_every_core_options_class_in_order() -> None:
    """``Settings``'s fields come from ``CORE_OPTIONS`` at run time; what mypy reads is the list of
    bases written under ``TYPE_CHECKING``: a class added to one and not the other fails here."""
    import ast
    import inspect

    import relayd.config.settings as settings_module
    from relayd.config.core import CORE_OPTIONS

    tree = ast.parse(inspect.getsource(settings_module))
    (declared,) = [
        node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == "_Declared"
    ]
    bases = [base.id for base in declared.bases if isinstance(base, ast.Name)]

    assert bases == ["_SettingsBase", *(cls.__name__ for cls in CORE_OPTIONS)]
