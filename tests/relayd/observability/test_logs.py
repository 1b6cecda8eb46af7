"""Logging: JSON lines or console output, fixed fields, and no secret ever rendered."""

from __future__ import annotations

import io
import logging

import orjson
import pytest
import structlog

from relayd.config.redis_url import redact_url
from relayd.observability.logs import MAX_VALUE_CHARS, REDACTED, Redactor, configure_logging

pytestmark = pytest.mark.usefixtures("no_relayd_env", "reset_logging")


@pytest.fixture(autouse=True)
def _reset_structlog():
    yield
    structlog.reset_defaults()
    logging.getLogger().handlers.clear()


def test_redactor_replaces_secrets_and_url_credentials_everywhere():
    redactor = Redactor(["hunter2", "hunter"])

    event = redactor(
        None, "info", {"event": "x", "error": "auth hunter2 failed", "nested": {"u": "redis://a:b@h/0"}}
    )

    assert event["error"] == f"auth {REDACTED} failed"
    assert event["nested"] == {"u": f"redis://{REDACTED}@h/0"}


def test_json_lines_carry_the_fields_and_no_secret():
    out = io.StringIO()
    configure_logging(log_format="json", log_level="info", secrets=["hunter2"], stream=out)
    log = structlog.get_logger("t")

    log.info("pass_finished", prefix="stm", kind="outbox", count=3, duration_s=0.5, error="pw=hunter2")
    log.debug("hidden")
    try:
        raise RuntimeError("cannot auth with hunter2 at rediss://u:hunter2@h/0")
    except RuntimeError:
        log.exception("boom")

    lines = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["pass_finished", "boom"]
    first = lines[0]
    assert (first["prefix"], first["kind"], first["count"], first["duration_s"]) == ("stm", "outbox", 3, 0.5)
    assert first["level"] == "info"
    assert "timestamp" in first
    assert "hunter2" not in out.getvalue()
    assert "RuntimeError" in lines[1]["exception"]


def test_console_format_is_redacted_too():
    out = io.StringIO()
    configure_logging(log_format="console", log_level="debug", secrets=["hunter2"], stream=out)

    structlog.get_logger("t").debug("redis_unreachable", attempt=2, error="WRONGPASS hunter2")

    text = out.getvalue()
    assert "redis_unreachable" in text
    assert "attempt" in text
    assert "hunter2" not in text


def test_stdlib_logging_goes_through_the_same_redaction():
    out = io.StringIO()
    configure_logging(log_format="json", log_level="info", secrets=["hunter2"], stream=out)

    logging.getLogger("redis.something").warning("connect to redis://x:hunter2@h failed")

    line = orjson.loads(out.getvalue().splitlines()[0])
    assert "hunter2" not in out.getvalue()
    assert line["level"] == "warning"


def test_format_defaults_to_json_off_a_terminal():
    out = io.StringIO()  # not a tty
    configure_logging(log_format=None, stream=out)

    structlog.get_logger("t").info("hello")

    assert orjson.loads(out.getvalue())["event"] == "hello"


@pytest.mark.timeout(20)
def test_url_redaction_is_linear_on_a_megabyte():
    """A 1 MB run of scheme characters (a hostile timer member in a log line) is scanned once,
    not once per position; a URL at its end is still redacted."""
    huge = "F" * 1_000_000 + " see redis://user:pw@host/0 " + "a://" * 250_000

    redacted = redact_url(huge)

    assert redacted.startswith("F" * 1_000_000 + " see redis://***@host/0 ")
    assert "pw" not in redacted
    assert len(redacted) == len(huge) - len("user:pw") + len("***")


def test_a_huge_value_is_cut_in_the_line_after_redaction():
    out = io.StringIO()
    configure_logging(log_format="json", log_level="info", secrets=["hunter2"], stream=out)

    structlog.get_logger("t").warning("dead_lettered", id="x" * 300_000 + "rediss://u:hunter2@h/0")

    line = orjson.loads(out.getvalue())
    assert len(line["id"]) < MAX_VALUE_CHARS + 100
    assert "chars cut" in line["id"]
    assert line["id"].endswith("rediss://***@h/0")
    assert "hunter2" not in out.getvalue()


def test_a_value_holding_undecodable_bytes_is_rendered_not_raised():
    """A hash field read with surrogateescape, logged as it is: the line is written."""
    out = io.StringIO()
    configure_logging(log_format="json", log_level="info", stream=out)

    structlog.get_logger("t").warning("dead_lettered", id=b"\xff7".decode("utf-8", "surrogateescape"))

    assert orjson.loads(out.getvalue())["id"] == "\\udcff7"
