"""Every missing-extra hint names the install from an index and from a source checkout."""

from __future__ import annotations

import sys

import pytest

from relayd.errors import ConfigError
from relayd.extras import import_extra, install_command, missing_extra
from relayd.sinks import SinkOptions, resolve_sink


def test_install_command_names_the_index_and_the_checkout() -> None:
    assert install_command("kafka") == "pip install 'relayd[kafka]' (from a checkout: pip install '.[kafka]')"


def test_import_extra_returns_the_modules_in_order() -> None:
    import json
    import math

    assert import_extra("x", "x", "json", "math") == (json, math)


@pytest.mark.parametrize(
    ("spec", "module", "line"),
    [
        ("kafka:127.0.0.1:9092?topic=t", "confluent_kafka", missing_extra("kafka", "kafka")),
        ("nats:nats://127.0.0.1:4222?subject=s", "nats", missing_extra("nats", "nats")),
        ("amqp:amqp://127.0.0.1/?routing_key=k", "aiormq", missing_extra("amqp", "amqp", needs="aiormq")),
        (
            "sqs:https://sqs.us-east-1.amazonaws.com/1/q",
            "aiobotocore.session",
            "sink 'sqs' needs aiobotocore",
        ),
    ],
    ids=["kafka", "nats", "amqp", "sqs"],
)
def test_each_sink_without_its_extra_says_the_one_line(
    monkeypatch: pytest.MonkeyPatch, spec: str, module: str, line: str
) -> None:
    """A None entry in sys.modules makes the import fail, as a missing extra does."""
    monkeypatch.setitem(sys.modules, module, None)

    with pytest.raises(ConfigError) as info:
        resolve_sink(spec, SinkOptions())

    assert str(info.value).startswith(line)
    assert str(info.value).endswith(install_command(spec.partition(":")[0].replace("sqs", "aws")))
