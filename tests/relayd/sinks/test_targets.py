"""Each sink family's target parser lives in its package's ``target.py``; the spec parser loads
none of them, and no client library, until a spec names the family."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import relayd.sinks

SINKS = Path(relayd.sinks.__file__).parent

#: Each built-in family's package and the parser its ``target.py`` exposes.
PARSERS = {
    "amqp": "parse_amqp_target",
    "aws": "parse_aws_target",
    "gcp": "parse_pubsub_target",
    "harel": "parse_harel_target",
    "kafka": "parse_kafka_target",
    "nats": "parse_nats_target",
    "redis_stream": "parse_redis_stream_target",
    "webhook": "parse_webhook_target",
}

#: The client libraries of the sinks (top-level module names).
CLIENT_LIBRARIES = (
    "aiohttp",
    "aiokafka",
    "confluent_kafka",
    "nats",
    "aio_pika",
    "aiormq",
    "google",
    "aiobotocore",
    "botocore",
    "redis",
)

#: One spec of every built-in family.
SPECS = [
    "log",
    "null",
    "jsonl:-",
    "python:my_pkg.sinks:make",
    "webhook:https://hooks.example.com/relay",
    "redis-stream:redis://127.0.0.1:6379/0?stream=events",
    "harel:redis://127.0.0.1:6379/0?store=redis://127.0.0.1:6379/1",
    "pubsub:projects/my-project/topics/events",
    "kafka:127.0.0.1:9092?topic=events",
    "nats:nats://127.0.0.1:4222?subject=events",
    "amqp:amqp://127.0.0.1?routing_key=events",
    "sqs:https://sqs.eu-west-1.amazonaws.com/123456789012/events",
    "sns:arn:aws:sns:eu-west-1:123456789012:events",
    "kinesis:events?region=eu-west-1",
]
#: The families whose factory parses their target: its module and the call on ``spec.target``.
FACTORY_PARSED = {
    "kafka": ("kafka", "parse_kafka_target(spec.target)"),
    "nats": ("nats", "parse_nats_target(spec.target)"),
    "amqp": ("amqp", "parse_amqp_target(spec.target)"),
    "sqs": ("aws", "parse_aws_target('sqs', spec.target)"),
    "sns": ("aws", "parse_aws_target('sns', spec.target)"),
    "kinesis": ("aws", "parse_aws_target('kinesis', spec.target)"),
}


def test_every_family_package_has_a_target_module_with_its_parser() -> None:
    """A package with a ``sink.py`` is a sink family: its ``target.py`` parses its target."""
    families = sorted(path.parent.name for path in SINKS.glob("*/sink.py"))

    assert families == sorted(PARSERS)
    for family, parser in PARSERS.items():
        module = importlib.import_module(f"relayd.sinks.{family}.target")
        assert callable(getattr(module, parser)), family


@pytest.mark.parametrize("path", [*sorted(SINKS.glob("*/target.py")), SINKS / "target_rules.py"], ids=str)
def test_no_target_parser_imports_the_spec_parser(path: Path) -> None:
    """The spec parser dispatches to the target parsers, never the other way round (not even
    inside a function): the rules they share are ``relayd.sinks.target_rules``'s."""
    imported = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)

    assert "relayd.sinks.spec" not in imported


@pytest.mark.parametrize("spec", SPECS, ids=[spec.partition(":")[0] for spec in SPECS])
def test_parsing_a_spec_loads_no_client_library_and_no_sink(spec: str) -> None:
    """Parsing a spec, and its target where the factory does, imports no sink's client library
    and no sink module: a bad spec is refused without them (and without the extra installed)."""
    code = f"import sys\nfrom relayd.sinks.spec import parse_sink_spec\nspec = parse_sink_spec({spec!r})\n"
    if (parsed := FACTORY_PARSED.get(spec.partition(":")[0])) is not None:
        family, call = parsed
        code += f"from relayd.sinks.{family}.target import {call.partition('(')[0]}\n{call}\n"
    code += "print(' '.join(sorted(sys.modules)))\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)

    assert done.returncode == 0, done.stderr
    loaded = done.stdout.split()
    assert [name for name in loaded if name.partition(".")[0] in CLIENT_LIBRARIES] == []
    assert [name for name in loaded if name.startswith("relayd.sinks.") and name.endswith(".sink")] == []


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        ("webhook", "http://h:notaport/", "sink 'webhook': malformed URL (Port could not be cast"),
        ("nats", "nats://h:99999?subject=s", "sink 'nats': malformed server URL"),
        (
            "sqs",
            "https://sqs.eu-west-1.amazonaws.com/1/q?endpoint_url=http://h:x",
            "endpoint_url is malformed",
        ),
    ],
)
def test_a_url_with_a_bad_port_is_one_line_in_each_family_s_own_words(
    parse: str, text: str, message: str
) -> None:
    """One rule (``target_rules.url_parts``) checks a URL's port for every family, each saying it its way."""
    from relayd.errors import ConfigError
    from relayd.sinks.aws.target import parse_aws_target
    from relayd.sinks.nats.target import parse_nats_target
    from relayd.sinks.webhook.target import parse_webhook_target

    parsers = {
        "webhook": parse_webhook_target,
        "nats": parse_nats_target,
        "sqs": lambda t: parse_aws_target("sqs", t),
    }
    with pytest.raises(ConfigError) as refused:
        parsers[parse](text)
    assert message in str(refused.value)
