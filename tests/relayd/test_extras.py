"""Every missing-extra hint names the install from an index and from a source checkout."""

from __future__ import annotations

import pytest

from relayd.extras import install_command
from relayd.sinks.amqp import sink as amqp
from relayd.sinks.aws import sink as aws
from relayd.sinks.kafka import sink as kafka
from relayd.sinks.nats import sink as nats


def test_install_command_names_the_index_and_the_checkout() -> None:
    assert install_command("kafka") == "pip install 'relayd[kafka]' (from a checkout: pip install '.[kafka]')"


@pytest.mark.parametrize(
    ("hint", "extra"),
    [
        (kafka.INSTALL_HINT, "kafka"),
        (nats.INSTALL_HINT, "nats"),
        (amqp.INSTALL_HINT, "amqp"),
        (aws.INSTALL_HINT, "aws"),
    ],
)
def test_each_sink_hint_uses_the_one_wording(hint: str, extra: str) -> None:
    assert hint.endswith(install_command(extra))
