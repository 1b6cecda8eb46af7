"""The broker sinks without their extras, and their pure target grammar and templates."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from relayd.config.settings import load_settings
from relayd.errors import ConfigError
from relayd.sinks.kafka.options import KafkaOptions
from relayd.sinks.kafka.target import parse_kafka_target
from relayd.sinks.nats.options import NatsOptions
from relayd.sinks.nats.target import parse_nats_target
from relayd.sinks.routing import fill_targets, fill_template


@pytest.mark.parametrize(
    ("module", "spec", "extra"),
    [
        ("confluent_kafka", "kafka:127.0.0.1:9092?topic=events", "relayd[kafka]"),
        ("nats", "nats:nats://127.0.0.1:4222?subject=events", "relayd[nats]"),
    ],
    ids=["kafka", "nats"],
)
def test_naming_a_broker_sink_without_its_extra_is_one_line_and_exit_2(tmp_path: Path, module, spec, extra):
    """The client library is made unimportable, as on an install without the extra."""
    blocker = tmp_path / module
    blocker.mkdir()
    (blocker / "__init__.py").write_text(f"raise ImportError('No module named {module}')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAYD_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "relayd",
            "sweep",
            "--once",
            "--sink",
            spec,
            "--redis-url",
            "redis://127.0.0.1:1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )

    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert f"pip install '{extra}'" in lines[0]
    assert "Traceback" not in result.stderr


def test_target_templates_fill_kind_prefix_and_each_target():
    template = fill_template("{prefix}.{kind}.{target}", kind="outbox", prefix="stm")

    names = fill_targets(template, ["exe-1", None, "exe-2"])

    assert names == ["stm.outbox.exe-1", "stm.outbox._", "stm.outbox.exe-2"]
    assert fill_targets("events", ["a", "b"]) == ["events", "events"]


def test_targets_parse_hosts_topics_subjects_tls_and_timeouts():
    kafka = parse_kafka_target("k1:9092, k2:9093?topic=events.{target}&tls=true&timeout_s=5")
    nats = parse_nats_target("nats://n1:4222,tls://n2:4222?subject=ev.{kind}")

    assert kafka.bootstrap == (("k1", 9092), ("k2", 9093))
    assert (kafka.topic, kafka.tls, kafka.timeout_s) == ("events.{target}", True, 5.0)
    assert nats.servers == ("nats://n1:4222", "tls://n2:4222")
    assert (nats.subject, nats.tls, nats.timeout_s) == ("ev.{kind}", True, 30.0)
    assert nats.hosts == ("n1", "n2")


def test_broker_credentials_come_from_files_reach_the_sinks_and_are_redacted(tmp_path: Path):
    files = {
        name: tmp_path / name for name in ("kafka-user", "kafka-password", "nats-token", "ca.pem", "creds")
    }
    for name, path in files.items():
        path.write_text(f"{name}-value\n")
    ca_pem = b"-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n"
    files["ca.pem"].write_bytes(ca_pem)

    settings = load_settings(
        kafka_username_file=files["kafka-user"],
        kafka_password_file=files["kafka-password"],
        kafka_sasl_mechanism="SCRAM-SHA-256",
        kafka_ca_file=files["ca.pem"],
        nats_token_file=files["nats-token"],
        nats_creds_file=files["creds"],
        nats_ca_file=files["ca.pem"],
    )
    kafka = settings.own_options(KafkaOptions)
    nats = settings.own_options(NatsOptions)

    assert kafka.username is not None
    assert kafka.password is not None
    assert (kafka.username.value, kafka.password.value) == ("kafka-user-value", "kafka-password-value")
    assert (kafka.sasl_mechanism, kafka.ca_file) == ("SCRAM-SHA-256", files["ca.pem"])
    assert nats.token is not None
    assert (nats.token.value, nats.creds_file) == ("nats-token-value", files["creds"])
    # watched, so a rotation reaches the sinks
    assert settings.watched("--kafka-password-file") is kafka.password
    assert kafka.ca is not None
    assert kafka.ca.value == ca_pem
    assert nats.ca is not None
    assert nats.ca.value == ca_pem
    assert {"kafka-password-value", "nats-token-value"} <= set(settings.secrets())
    assert "kafka-user-value" not in settings.secrets()  # a username is no secret
    assert "kafka-password-value" not in repr(kafka)
    assert "nats-token-value" not in repr(nats)


def test_an_unreadable_broker_credential_file_is_one_config_error_naming_the_option(tmp_path: Path):
    with pytest.raises(ConfigError, match="--kafka-password-file") as caught:
        load_settings(kafka_password_file=tmp_path / "missing")

    assert "\n" not in str(caught.value)
