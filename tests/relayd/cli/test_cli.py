"""The relayd command line: help, bad configuration, precedence, status --json, dlq, no secret logged."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
import typing
import uuid
from pathlib import Path
from typing import ClassVar

import orjson
import pytest
import redis
import typer.main
from support.seeding import Entries
from typer.testing import CliRunner

from relayd.cli import options as o
from relayd.cli.app import app
from relayd.config.defaults import Defaults
from relayd.options import option
from relayd.sinks.families import BUILT_IN_OPTIONS
from relayd.sinks.own_options import declared, option_name

WIDE = {"COLUMNS": "300", "TERMINAL_WIDTH": "300"}

COMMANDS = [["sweep"], ["status"], ["demo"], ["dlq", "list"], ["dlq", "replay"], ["dlq", "purge"]]


def invoke(args: list[str], env: dict[str, str] | None = None):
    return CliRunner().invoke(app, args, env={**WIDE, **(env or {})})


def _command(path: list[str]):
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    return command


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_help_lists_every_options_env_var(path):
    """Every option that has an env var shows it in --help (click's show_envvar)."""
    result = invoke([*path, "--help"])
    envvars = [p.envvar for p in _command(path).params if getattr(p, "envvar", None)]

    assert result.exit_code == 0
    assert envvars
    for envvar in envvars:
        assert f"RELAYD_{envvar.removeprefix('RELAYD_')}" in result.output


def _option_hints() -> dict[str, typing.Any]:
    """Each option's annotation: ``Defaults``' fields and every built-in sink's own options."""
    hints = dict(typing.get_type_hints(Defaults))
    for cls in BUILT_IN_OPTIONS:
        own = typing.get_type_hints(cls)
        hints |= {option_name(cls, field.name): own[field.name] for field in declared(cls)}
    return hints


def test_option_types_follow_the_annotations_of_their_defaults():
    """An option's Typer type is its default's field's (``Defaults`` or the sink's options class):
    int, float, a path, a switch (or None)."""
    params = {param.name: param for path in (["sweep"], ["console"]) for param in _command(path).params}
    typed = 0
    for name, hint in _option_hints().items():
        value_type = next((arg for arg in typing.get_args(hint) if arg is not type(None)), hint)
        if value_type in (int, float, Path, bool):
            assert params[name].type_descriptor.annotation is value_type, name
            typed += 1

    assert typed > 25
    assert params["log_level"].type_descriptor.annotation is str
    assert params["prefix"].type_descriptor.annotation == list[str]
    assert params["prefix"].multiple


@dataclasses.dataclass(frozen=True)
class _OwnOptions:
    """A command's own options, as ``relayd bench`` declares its."""

    env_prefix: ClassVar[str] = "own-test"

    count: int = option(3, "How many.", panel=None, constraints={"ge": 1})
    label: str = option("plain", "What to call it.", panel=None, flag="--name")
    loud: bool = option(True, "Shout.", panel=None, negatable=True)


def _own_command(seen: list[_OwnOptions]) -> typer.Typer:
    own = typer.Typer()

    @own.command()
    @o.with_options(_OwnOptions, direct=True)
    def run(ctx: typer.Context, **_: object) -> None:
        seen.append(o.options_from(_OwnOptions, ctx))

    return own


def test_a_command_s_own_options_are_its_flags_and_variables_over_the_class_defaults():
    """A class with an ``env_prefix``: flags without a prefix, ``RELAYD_<ENV_PREFIX>_<FLAG>``
    variables, its bounds checked by click, and the class's defaults for what is not given."""
    seen: list[_OwnOptions] = []
    own = _own_command(seen)

    given = CliRunner().invoke(own, ["--count", "5", "--no-loud"], env={"RELAYD_OWN_TEST_NAME": "set"})
    defaulted = CliRunner().invoke(own, [], env={"RELAYD_COUNT": "9", "RELAYD_NAME": "unread"})
    refused = CliRunner().invoke(own, ["--count", "0"], env=WIDE)

    assert (given.exit_code, defaulted.exit_code, refused.exit_code) == (0, 0, 2), given.output
    assert seen == [_OwnOptions(count=5, label="set", loud=False), _OwnOptions()]
    assert "Invalid value for '--count' (env var: 'RELAYD_OWN_TEST_COUNT')" in refused.output


def test_a_command_s_own_option_takes_inclusive_bounds_only():
    """Click ranges have no open bound here: ``gt`` on a direct option is refused when declared."""

    @dataclasses.dataclass(frozen=True)
    class Open:
        env_prefix: ClassVar[str] = "own-test"
        rate: float = option(1.0, "A rate.", panel=None, constraints={"gt": 0})

    with pytest.raises(TypeError, match="inclusive bounds"):
        o.declared_options(Open, direct=True)


#: Settings only ``relayd console`` reads (its own listener, token and actions).
CONSOLE_SETTINGS = {"console_addr", "console_token_file", "allow_actions", "console_replay_rate"}


def test_sweep_help_covers_every_setting():
    """``sweep`` exposes every Settings field (but the console's own) as --name with RELAYD_NAME."""
    result = invoke(["sweep", "--help"])

    for name in set(_option_hints()) - CONSOLE_SETTINGS:
        assert f"--{name.replace('_', '-')}" in result.output
        assert f"RELAYD_{name.upper()}" in result.output


def test_sweep_help_shows_its_own_options_then_the_panels_in_order():
    """Typer's rich_help_panel groups the options; the command's own come first, then Redis."""
    output = invoke(["sweep", "--help"]).stdout

    panels = ["Options", "Redis", "Sinks", "Tuning", "Logs and metrics", "Credentials and TLS"]
    positions = [output.index(f"─ {panel} ─") for panel in panels]
    assert positions == sorted(positions)
    assert output.index("--once") < positions[1] < output.index("--redis-url") < positions[2]


def test_console_help_covers_its_own_settings():
    result = invoke(["console", "--help"])

    for name in CONSOLE_SETTINGS | {"redis_url", "prefix", "redis_password_file", "redis_ca_file"}:
        assert f"--{name.replace('_', '-')}" in result.output
        assert f"RELAYD_{name.upper()}" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bogus"], "No such option: --bogus"),
        (["--batch", "many"], "Invalid value for '--batch'"),
        (["--batch", "0"], "invalid --batch (RELAYD_BATCH)"),
        (["--sink", "nope"], "unknown sink 'nope'"),
        (["--timer-sink", "jsonl"], "jsonl"),
        (["--redis-url", "http://localhost"], "must start with one of redis://"),
        (["--redis-url", "redis://h:notaport"], "malformed Redis URL"),
        (["--redis-password-file", "/nonexistent/pw"], "--redis-password-file: cannot read"),
        (["--redis-url", "redis://:hunter2@10.1.2.3:6379/0"], "refusing to send Redis credentials"),
        (["--redis-url", "redis://10.1.2.3:6379/0"], "needs --allow-plaintext"),
        (["--prefix", "{s-9..1}"], "invalid --prefix"),
        (["--log-format", "xml"], "invalid --log-format"),
    ],
    ids=[
        "unknown-flag",
        "non-integer",
        "out-of-range",
        "unknown-sink",
        "sink-without-path",
        "bad-scheme",
        "bad-port",
        "missing-password-file",
        "credentials-plaintext-remote",
        "plaintext-remote",
        "bad-prefix-range",
        "bad-log-format",
    ],
)
def test_bad_configuration_is_one_line_and_exit_2(args, message):
    result = invoke(["sweep", "--once", *args])

    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("relayd: error: ")
    assert message in lines[0]
    assert "Traceback" not in result.output
    assert "hunter2" not in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sink", "webhook:ftp://127.0.0.1/hook"], "needs an http:// or https:// URL"),
        (
            ["--sink", "webhook:http://127.0.0.1:9/h", "--webhook-headers-file", "/nonexistent/h"],
            "cannot read",
        ),
        (
            ["--sink", "webhook:http://127.0.0.1:9/h", "--webhook-headers-file", "BAD"],
            "line 2 is not 'Name: value'",
        ),
        (
            ["--sink", "webhook:http://127.0.0.1:9/h", "--webhook-headers-file", "RESERVED"],
            "set by relayd itself",
        ),
        (
            ["--sink", "webhook:http://127.0.0.1:9/h", "--webhook-ca-file", "/nonexistent/ca"],
            "--webhook-ca-file",
        ),
        (["--sink", "webhook:http://127.0.0.1:9/h", "--webhook-read-timeout", "0"], "--webhook-read-timeout"),
        (
            ["--sink", "webhook:http://127.0.0.1:9/h", "--webhook-secret-file", "RAW"],
            "secret 1 is not a 'whsec_<base64>' secret",
        ),
        (
            ["--sink", "webhook:http://127.0.0.1:9/h", "--webhook-secret-file", "MALFORMED"],
            "secret 2 holds a 'whsec_' secret that is not valid base64",
        ),
        (
            ["--sink", "webhook:http://127.0.0.1:9/h", "--webhook-signature", "hmac"],
            "invalid --webhook-signature",
        ),
        (["--sink", "webhook:http://127.0.0.1:9/h", "--format", "xml"], "invalid --format"),
        (["--sink", "log", "--cloudevents-mode", "batch"], "invalid --cloudevents-mode"),
    ],
    ids=[
        "not-http",
        "unreadable-headers-file",
        "bad-header-line",
        "reserved-header",
        "missing-ca",
        "zero-timeout",
        "raw-secret-under-standard",
        "malformed-whsec-secret",
        "unknown-signature-scheme",
        "unknown-format",
        "unknown-cloudevents-mode",
    ],
)
def test_bad_webhook_configuration_is_one_line_and_exit_2(args, message, tmp_path):
    """A header value or a secret never appears in the error, even when its line is the bad one."""
    (tmp_path / "BAD").write_text("Authorization: Bearer ok\nBearer hunter2\n")
    (tmp_path / "RESERVED").write_text("# the key is ours\nIdempotency-Key: hunter2\n")
    (tmp_path / "RAW").write_text("hunter2\n")
    (tmp_path / "MALFORMED").write_text("whsec_aHVudGVyMg==\nwhsec_hunter2!!\n")
    files = ("BAD", "RESERVED", "RAW", "MALFORMED")
    args = [str(tmp_path / a) if a in files else a for a in args]

    result = invoke(["sweep", "--once", *args])

    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert "hunter2" not in result.output
    assert "Traceback" not in result.output


def test_a_bad_flag_before_the_command_is_one_line_too():
    """Typer would box a root usage error in a rich panel; relayd prints its one line."""
    result = invoke(["--bogus"])

    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2
    assert lines == ["relayd: error: No such option: --bogus (see 'relayd --help')"]


def test_version_and_help_list_the_commands_in_order_of_use():
    import relayd

    version = invoke(["--version"])
    help_text = invoke(["--help"]).stdout

    assert (version.exit_code, version.stdout) == (0, f"relayd {relayd.__version__}\n")
    names = ["sweep", "status", "dlq", "acl", "demo", "bench", "console"]
    positions = [help_text.index(f" {name} ") for name in names]
    assert positions == sorted(positions)


def test_a_flag_wins_over_its_variable_and_the_variable_over_the_default(redis_url: str, prefix: str):
    """RELAYD_SINK names no sink, but --sink is given: the flag is used, the variable never read."""
    common = ["sweep", "--once", "--redis-url", redis_url, "--prefix", prefix]

    flag_wins = invoke([*common, "--sink", "null"], env={"RELAYD_SINK": "nope"})
    variable_read = invoke(common, env={"RELAYD_SINK": "nope"})

    assert flag_wins.exit_code == 0, flag_wins.output
    assert variable_read.exit_code == 2
    assert "unknown sink 'nope'" in variable_read.stderr


def test_bad_env_var_is_exit_2_too():
    result = invoke(["sweep", "--once"], env={"RELAYD_SINK": "nope"})

    assert result.exit_code == 2
    assert "unknown sink 'nope'" in result.stderr


def test_unreachable_redis_is_exit_3(closed_port: int):
    result = invoke(["status", "--redis-url", f"redis://127.0.0.1:{closed_port}/0", "--log-format", "json"])

    assert result.exit_code == 3
    assert "unreachable after 5 attempts" in result.stderr.splitlines()[-1]


def _seed(client: redis.Redis, prefix: str, now: float) -> None:
    entries = Entries(client.pipeline(transaction=False), prefix)
    entries.raw_outbox("1", b'{"t":"a","e":"{}"}').raw_outbox("2", b"x").raw_outbox("3", b"y")
    entries.raw_spawn("1", b"{}").raw_spawn("2", b"{}")
    entries.timer("e1", "a", now - 30).timer("e1", "b", now - 5).timer("e2", "a", now + 60).timer(
        "e3", "a", now + 90
    )
    entries.pipe.hset(f"{prefix}:relay:dead:timer", mapping={"t1": b"{}"})
    entries.pipe.execute()


def test_status_json_reports_backlog_due_timers_lag_dead_letters(redis_url: str, prefix: str):
    client = redis.Redis.from_url(redis_url)
    _seed(client, prefix, time.time())

    result = invoke(["status", "--json", "--redis-url", redis_url, "--prefix", prefix])

    assert result.exit_code == 0, result.output
    (report,) = orjson.loads(result.stdout)["prefixes"]
    assert report["prefix"] == prefix
    assert report["backlog"] == {"spawn": 2, "outbox": 3, "timer": 4}
    assert report["due_timers"] == 2
    assert 29 <= report["oldest_timer_lag_s"] <= 40
    assert report["dead_letters"] == {"spawn": 0, "outbox": 0, "timer": 1}
    assert report["active"] is None


def test_status_table_and_env_prefix_when_no_flag(redis_url: str, prefix: str):
    client = redis.Redis.from_url(redis_url)
    _seed(client, prefix, time.time())

    from_env = invoke(
        ["status", "--json"], env={"RELAYD_REDIS_URL": redis_url, "RELAYD_PREFIX": f"{prefix},other"}
    )
    flag_wins = invoke(
        ["status", "--json", "--prefix", prefix], env={"RELAYD_REDIS_URL": redis_url, "RELAYD_PREFIX": "x"}
    )
    table = invoke(["status", "--redis-url", redis_url, "--prefix", prefix])

    assert [r["prefix"] for r in orjson.loads(from_env.stdout)["prefixes"]] == [prefix, "other"]
    assert [r["prefix"] for r in orjson.loads(flag_wins.stdout)["prefixes"]] == [prefix]
    assert table.exit_code == 0
    assert prefix in table.stdout
    assert {"due", "timers", "oldest", "lag"} <= set(table.stdout.split())


def test_status_with_a_password_never_shows_it(tmp_path: Path, password_redis, prefix: str):
    password = tmp_path / "pw"
    password.write_text("right-pw\n")

    result = invoke(
        ["status", "--json", "--redis-url", password_redis.url, "--prefix", prefix, "--log-level", "debug"],
        env={"RELAYD_REDIS_PASSWORD_FILE": str(password)},
    )

    assert result.exit_code == 0, result.output
    assert "right-pw" not in result.output


def test_dlq_list_replay_purge(redis_url: str, prefix: str):
    """A malformed entry is dead-lettered by a sweep; dlq lists it, replays it, purges it."""
    client = redis.Redis.from_url(redis_url)
    client.hset(f"{prefix}:outbox", mapping={"1": b"not json"})
    common = ["--redis-url", redis_url, "--prefix", prefix]

    swept = invoke(["sweep", "--once", "--sink", "null", *common])
    listed = invoke(["dlq", "list", "--json", *common])
    table = invoke(["dlq", "list", "--kind", "outbox", *common])
    replayed = invoke(["dlq", "replay", "--all", *common])
    back = client.hget(f"{prefix}:outbox", "1")
    invoke(["sweep", "--once", "--sink", "null", *common])
    refused = invoke(["dlq", "purge", *common])
    purged = invoke(["dlq", "purge", "--yes", *common])

    assert swept.exit_code == 1, swept.output
    (letter,) = orjson.loads(listed.stdout)
    assert (letter["prefix"], letter["kind"], letter["reason_code"]) == (prefix, "outbox", "bad_json")
    assert letter["id"] in table.stdout
    assert replayed.exit_code == 0
    assert "replayed 1" in replayed.stdout
    assert back == b"not json"
    assert refused.exit_code == 2
    assert "--yes" in refused.stderr
    assert "purged 1" in purged.stdout
    assert client.hlen(f"{prefix}:relay:dead:outbox") == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["dlq", "replay"], "pass --all"),
        (["dlq", "replay", "x", "--all"], "not both"),
        (["dlq", "list", "--kind", "spawns"], "invalid --kind"),
    ],
)
def test_dlq_usage_errors(args, message, closed_port: int):
    result = invoke([*args, "--redis-url", f"redis://127.0.0.1:{closed_port}/0"])

    assert result.exit_code == 2
    assert message in result.stderr


def test_a_sweep_configured_with_a_password_never_logs_it(tmp_path: Path, password_redis, prefix: str):
    """Debug logs of a whole run (log sink: one line per envelope) never contain the password."""
    client = redis.Redis(port=password_redis.port, password=password_redis.password)
    client.hset(
        f"{prefix}:outbox", mapping={"1": b'{"t": "a", "e": "{\\"id\\": \\"e1\\", \\"kind\\": \\"k\\"}"}'}
    )
    client.zadd(f"{prefix}:timers", {"x\x00p": time.time() - 1})
    password = tmp_path / "pw"
    password.write_text("right-pw\n")

    result = invoke(
        [
            "sweep",
            "--once",
            "--sink",
            "log",
            "--prefix",
            prefix,
            "--log-level",
            "debug",
            "--log-format",
            "json",
        ],
        env={"RELAYD_REDIS_URL": password_redis.url, "RELAYD_REDIS_PASSWORD_FILE": str(password)},
    )

    assert result.exit_code == 0, result.output
    assert "pass_finished" in result.output or "timeout:x:p" in result.output
    assert "right-pw" not in result.output
    assert client.hlen(f"{prefix}:outbox") == 0


#: Printed by the child process after the command: every module it loaded, one line.
_MODULES_AFTER = """
import sys
from relayd.cli.app import main
try:
    main(sys.argv[1:])
finally:
    print("MODULES", " ".join(sorted(sys.modules)))
"""


#: What a sweep into ``null`` never needs: other commands' code (their option declarations aside,
#: which the command line is built from), and the client libraries of sinks it does not use.
_NOT_FOR_A_SWEEP = ("relayd.console.", "relayd.bench.", "relayd.demo", "relayd.sinks.webhook.")
_DECLARATIONS = {"relayd.console.options", "relayd.bench.options", "relayd.sinks.webhook.options"}
_CLIENTS = {"aiohttp", "aiokafka", "confluent_kafka", "nats", "aio_pika", "aiormq", "aiobotocore", "botocore"}


@pytest.mark.slow
def test_a_sweep_loads_no_help_renderer_nor_what_other_commands_and_sinks_use(redis_url: str, prefix: str):
    """``sweep --once`` runs without rich (Typer loads its rich help rendering only for help),
    without the console's, the bench's or the demo's code, a sink it does not use, or the
    OpenTelemetry tracing SDK (tracing was not asked for)."""
    args = ["sweep", "--once", "--redis-url", redis_url, "--prefix", prefix, "--sink", "null"]
    done = subprocess.run(
        [sys.executable, "-c", _MODULES_AFTER, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("MODULES ")]
    loaded = set(line.split()[1:])
    assert "relayd.engine.loop" in loaded  # the relay really ran
    assert "typer" in loaded  # the command line really is Typer's
    assert {"rich", "typer.rich_utils"} & loaded == set()
    assert {m for m in loaded if m.startswith(_NOT_FOR_A_SWEEP)} - _DECLARATIONS == set()
    assert {m.partition(".")[0] for m in loaded} & _CLIENTS == set()
    assert "opentelemetry.sdk.trace" not in loaded


def _dead_letter_outbox(redis_url: str, prefix: str, seqs: list[str]) -> subprocess.CompletedProcess[str]:
    """Malformed outbox entries, dead-lettered by a real ``relayd sweep --once`` process."""
    redis.Redis.from_url(redis_url).hset(f"{prefix}:outbox", mapping=dict.fromkeys(seqs, b"not json"))
    return subprocess.run(
        [
            *(sys.executable, "-m", "relayd", "sweep", "--once", "--sink", "null", "--log-format", "json"),
            *("--redis-url", redis_url, "--prefix", prefix),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_dlq_replay_names_unknown_ids_exits_1_and_still_replays_the_known(redis_server, prefix: str):
    client = redis.Redis.from_url(redis_server.url)
    _dead_letter_outbox(redis_server.url, prefix, ["1", "2"])
    common = ["--redis-url", redis_server.url, "--prefix", prefix]
    known = f"{prefix}:outbox:1"

    result = invoke(["dlq", "replay", known, "no-such-id", f"{prefix}:outbox:99", *common])

    assert result.exit_code == 1, result.output
    assert "replayed 1 dead letter(s)" in result.stdout
    (line,) = result.stderr.splitlines()
    assert line.endswith(f": no-such-id {prefix}:outbox:99")
    assert known not in line
    assert client.hget(f"{prefix}:outbox", "1") == b"not json"
    assert client.hkeys(f"{prefix}:relay:dead:outbox") == [f"{prefix}:outbox:2".encode()]


def test_dlq_replay_of_known_ids_only_exits_0(redis_server, prefix: str):
    _dead_letter_outbox(redis_server.url, prefix, ["1"])

    result = invoke(
        ["dlq", "replay", f"{prefix}:outbox:1", "--redis-url", redis_server.url, "--prefix", prefix]
    )

    assert result.exit_code == 0, result.output
    assert result.stderr == ""


def test_tables_at_80_columns_never_cut_an_id_and_logs_name_it_as_dlq_list_does(redis_server):
    """A long prefix makes long ids: each is whole in ``dlq list`` at 80 columns, and so are the
    prefix and every count in ``status``; the sweep's log line names the dead letter by that id."""
    prefix = "tenant-eu-" + uuid.uuid4().hex[:10]
    swept = _dead_letter_outbox(redis_server.url, prefix, ["998"])
    narrow = {"COLUMNS": "80", "TERMINAL_WIDTH": "80"}
    common = ["--redis-url", redis_server.url, "--prefix", prefix]

    listed = invoke(["dlq", "list", *common], env=narrow)
    status = invoke(["status", *common], env=narrow)
    dead_id = f"{prefix}:outbox:998"

    assert listed.exit_code == 0, listed.output
    assert max(len(line) for line in listed.stdout.splitlines()) <= 80
    assert dead_id in listed.stdout.split()
    assert "…" not in listed.stdout + status.stdout
    assert prefix in status.stdout.split(), status.stdout
    assert {"spawn=0", "outbox=1", "timer=0"} <= set(status.stdout.split()), status.stdout
    logged = [orjson.loads(line) for line in swept.stderr.splitlines() if dead_id.encode() in line.encode()]
    assert logged, swept.stderr
    assert all(record.get("id", dead_id) == dead_id for record in logged)


def test_dlq_replay_and_purge_from_the_cli_go_to_the_audit_trail(redis_server, prefix: str):
    """What the console's Audit page reads (``P:relay:audit``) names each CLI action, its count,
    the command and who ran it."""
    _dead_letter_outbox(redis_server.url, prefix, ["1", "2", "3"])
    common = ["--redis-url", redis_server.url, "--prefix", prefix]
    client = redis.Redis.from_url(redis_server.url)

    named = invoke(["dlq", "replay", f"{prefix}:outbox:1", *common])
    every = invoke(["dlq", "replay", "--all", *common])
    _dead_letter_outbox(redis_server.url, prefix, ["1"])
    purged = invoke(["dlq", "purge", "--yes", "--kind", "outbox", *common])
    nothing = invoke(["dlq", "purge", "--yes", *common])

    assert (named.exit_code, every.exit_code, purged.exit_code, nothing.exit_code) == (0, 0, 0, 0)
    records = [orjson.loads(r) for r in client.lrange(f"{prefix}:relay:audit", 0, -1)]
    assert [(r["action"], r["count"], r["command"]) for r in records] == [
        ("purge", 3, f"relayd dlq purge --prefix {prefix} --kind outbox --yes"),
        ("replay", 2, f"relayd dlq replay --prefix {prefix} --all"),
        ("replay", 1, f"relayd dlq replay --prefix {prefix} {prefix}:outbox:1"),
    ]
    assert records[2]["ids"] == [f"{prefix}:outbox:1"]
    assert all(r["source"].startswith("cli:") for r in records)


def test_dlq_list_names_a_reason_code_once(redis_server, prefix: str):
    """A malformed entry's reason opens with its code; the table shows the code once."""
    _dead_letter_outbox(redis_server.url, prefix, ["1"])
    raw = redis.Redis.from_url(redis_server.url)
    (stored,) = raw.hvals(f"{prefix}:relay:dead:outbox")
    letter = orjson.loads(stored)

    table = invoke(["dlq", "list", "--redis-url", redis_server.url, "--prefix", prefix])

    assert letter["reason"].startswith(f"{letter['reason_code']}:")
    assert table.stdout.count(letter["reason_code"]) == 1


def test_a_database_the_server_lacks_and_a_callable_that_is_no_sink_are_one_line_and_exit_2(redis_server):
    """Configuration errors, not outages: no retries, no traceback."""
    url = f"redis://127.0.0.1:{redis_server.port}/99"
    no_db = invoke(["status", "--redis-url", url])
    no_sink = invoke(["sweep", "--once", "--sink", "python:os:getcwd", "--redis-url", redis_server.url])

    assert no_db.exit_code == 2
    assert no_db.stderr.strip().splitlines() == [
        f"relayd: error: Redis at {url} has no database 99: pick one below "
        "its 'databases' setting (16 by default)"
    ]
    assert no_sink.exit_code == 2
    (line,) = no_sink.stderr.strip().splitlines()
    assert line.startswith("relayd: error: sink 'python:os:getcwd': ")
    assert "Traceback" not in no_sink.output
