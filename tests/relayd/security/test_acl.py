"""The ACL rule: exactly relayd's commands, its prefixes' keys, its wake-up channels; the CLI prints it."""

from __future__ import annotations

import hashlib
from pathlib import Path

from typer.testing import CliRunner

from relayd.cli.app import app
from relayd.security.acl import COMMANDS, acl_rule


def test_the_rule_starts_from_nothing_and_grants_only_what_relayd_uses():
    rule = acl_rule(["stm"]).split()

    assert rule[:3] == ["resetkeys", "resetchannels", "-@all"]
    assert [t for t in rule if t.startswith("+")] == [f"+{c}" for c in COMMANDS]
    assert [t for t in rule if t.startswith("~")] == ["~stm:*"]
    assert [t for t in rule if t.startswith("&")] == [
        "&__keyspace@0__:stm:outbox",
        "&__keyspace@0__:stm:spawns",
        "&__keyspace@0__:stm:timers",
    ]
    assert not {"+config", "+flushall", "+keys", "+select", "+xadd", "+@all"} & set(rule)


def test_glob_characters_in_a_prefix_are_escaped_and_streams_templates_widen():
    rule = acl_rule(["a*[b]"], db=2, streams=["ev:{target}", "plain"]).split()

    assert "~a\\*\\[b\\]:*" in rule
    assert {"~ev:*", "~plain", "+xadd"} <= set(rule)
    assert "&__keyspace@2__:a\\*\\[b\\]:outbox" in rule
    assert "+select" in rule  # redis-py selects a database other than 0 on each connection


def test_cli_prints_a_whole_setuser_command_with_the_password_hashed(tmp_path: Path):
    password = tmp_path / "pw"
    password.write_text("s3cret-pw\n")

    result = CliRunner().invoke(
        app, ["acl", "--prefix", "{s-0..1}", "--user", "relayd", "--password-file", str(password)]
    )

    assert result.exit_code == 0, result.output
    digest = hashlib.sha256(b"s3cret-pw").hexdigest()
    assert result.output.startswith(f"ACL SETUSER relayd reset on #{digest} resetkeys ")
    assert "~{s-0}:* ~{s-1}:*" in result.output
    assert "s3cret-pw" not in result.output


def test_cli_password_file_without_user_is_a_usage_error(tmp_path: Path):
    password = tmp_path / "pw"
    password.write_text("x")

    result = CliRunner().invoke(app, ["acl", "--password-file", str(password)])

    assert result.exit_code == 2
    assert "--password-file goes with --user" in result.output


def test_cli_without_prefix_prints_the_rule_for_the_default_prefix():
    result = CliRunner().invoke(app, ["acl"], env={"RELAYD_PREFIX": None})

    assert result.exit_code == 0, result.output
    assert result.output == acl_rule(["stm"]) + "\n"
