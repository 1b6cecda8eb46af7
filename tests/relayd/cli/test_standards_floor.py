"""The bad-input floor of the standards options (``--format``, ``--cloudevents-*``,
``--webhook-batch``, Standard Webhooks secrets): one line on stderr and exit 2, from the flag or
its environment variable, before any connection is tried, and never the secret."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from relayd.cli.app import app

#: A Redis nothing listens on: a check that let a bad value through would end with exit 3.
CLOSED = ["--redis-url", "redis://127.0.0.1:1/0"]
WEBHOOK = ["--sink", "webhook:http://127.0.0.1:9/h"]


def sweep(args: list[str], env: dict[str, str] | None = None) -> tuple[int, list[str], str]:
    result = CliRunner().invoke(
        app, ["sweep", "--once", *CLOSED, *args], env={"COLUMNS": "200", **(env or {})}
    )
    return result.exit_code, [line for line in result.stderr.splitlines() if line.strip()], result.output


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--format", "xml"], {}, "invalid --format"),
        ([], {"RELAYD_FORMAT": "CloudEvents 1.0"}, "invalid --format (RELAYD_FORMAT)"),
        (["--cloudevents-mode", "batched"], {}, "invalid --cloudevents-mode"),
        (["--webhook-batch", "0"], {}, "invalid --webhook-batch"),
        ([], {"RELAYD_WEBHOOK_BATCH": "0"}, "invalid --webhook-batch (RELAYD_WEBHOOK_BATCH)"),
        (["--webhook-batch", "10001"], {}, "invalid --webhook-batch"),
        (["--cloudevents-source", ""], {}, "the CloudEvents source must be a non-empty URI reference"),
        (["--cloudevents-source", "urn:my shop"], {}, "the CloudEvents source must be"),
        ([], {"RELAYD_CLOUDEVENTS_SOURCE": "urn:shöp"}, "invalid --cloudevents-source"),
    ],
    ids=[
        "unknown-format",
        "unknown-format-env",
        "unknown-mode",
        "batch-zero",
        "batch-zero-env",
        "batch-too-large",
        "empty-source",
        "source-with-a-space",
        "non-ascii-source-env",
    ],
)
def test_a_bad_standards_option_is_one_line_and_exit_2(
    args: list[str], env: dict[str, str], message: str
) -> None:
    code, lines, output = sweep([*WEBHOOK, *args], env)

    assert code == 2, output
    assert len(lines) == 1, output
    assert message in lines[0]
    assert "Traceback" not in output


@pytest.mark.parametrize(
    "content",
    [
        "whsec_",
        "whsec_hunter2!!",
        "whsec_aHVudGVyMg==\nhunter2",
        "v1,whsec_aHVudGVyMg==",
        "whsk_aHVudGVyMg==",
    ],
    ids=["empty", "not-base64", "second-line-raw", "prefixed", "ed25519-wrong-size"],
)
def test_a_malformed_whsec_secret_is_one_line_and_exit_2_without_the_secret(
    tmp_path: Path, content: str
) -> None:
    secret = tmp_path / "secret"
    secret.write_text(content + "\n")

    code, lines, output = sweep([*WEBHOOK, "--webhook-secret-file", str(secret)])

    assert code == 2, output
    assert len(lines) == 1, output
    assert lines[0].startswith("relayd: error: --webhook-secret-file: ")
    assert "'whsec_" in lines[0] or "'whsk_" in lines[0]
    assert "hunter2" not in output
    assert "aHVudGVyMg" not in output


def test_a_good_source_passes_the_floor_and_reaches_redis() -> None:
    """The checks refuse what they should only: a valid source gets as far as the connection."""
    code, lines, _ = sweep(
        [*WEBHOOK, "--format", "cloudevents", "--cloudevents-source", "urn:shop:%C3%B6/{prefix}"]
    )

    assert code == 3
    assert "unreachable" in lines[-1]
