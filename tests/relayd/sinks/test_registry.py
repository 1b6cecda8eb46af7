"""Resolving sink specs: built-ins and plugins through entry points, ``python:`` paths, unknown names."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from relayd.config.settings import load_settings
from relayd.envelope import Envelope
from relayd.envelope.batch import Batch
from relayd.errors import ConfigError, UnknownSink
from relayd.sinks import DELIVERED, Outcome, Sink, SinkOptions, SinkSpec, known_sinks, resolve_sink
from relayd.sinks.jsonl import JsonlSink
from relayd.sinks.kafka.options import KafkaOptions
from relayd.sinks.kafka.sink import KafkaSink
from relayd.sinks.log import LogSink
from relayd.sinks.null import NullSink
from relayd.sinks.own_options import option
from relayd.sinks.redis_stream.sink import RedisStreamSink
from relayd.sinks.webhook.sink import WebhookSink

from .conftest import outbox

PLUGIN_DIR = Path(__file__).parents[2] / "plugins" / "relayd-test-sink"
#: Build and install offline: the build backend (hatchling) is already installed.
PIP_OFFLINE = ("--quiet", "--no-deps", "--no-index", "--no-build-isolation", "--disable-pip-version-check")


class RecordingSink:
    """A sink built by ``python:`` in these tests; remembers the spec it was given."""

    name = "recording"

    def __init__(self, spec: SinkSpec, options: SinkOptions) -> None:
        self.spec, self.options = spec, options

    async def start(self) -> None:
        """Nothing to open."""

    async def deliver(self, batch: Sequence[Envelope]) -> Sequence[Outcome]:
        return [DELIVERED] * len(batch)

    def ready(self) -> bool:
        return True

    async def close(self) -> None:
        """Nothing to release."""


def make_recording(spec: SinkSpec, options: SinkOptions) -> RecordingSink:
    return RecordingSink(spec, options)


def not_a_sink(spec: SinkSpec, options: SinkOptions) -> object:
    return object()


BUILT_INS = [
    ("log", LogSink),
    ("null", NullSink),
    ("jsonl:-", JsonlSink),
    ("webhook:http://127.0.0.1:9/hook", WebhookSink),
    ("redis-stream:redis://127.0.0.1:6379/0?stream=s", RedisStreamSink),
]


@pytest.mark.parametrize(("spec", "cls"), BUILT_INS, ids=[s for s, _ in BUILT_INS])
def test_built_ins_resolve_through_entry_points(spec: str, cls: type) -> None:
    """Every built-in is found by name and satisfies the Sink Protocol."""
    sink = resolve_sink(spec, SinkOptions())

    assert cls is type(sink)
    assert isinstance(sink, Sink)


def test_harel_resolves_when_harel_is_installed() -> None:
    """The optional harel sink resolves like any other when its extra is installed."""
    sink = resolve_sink("harel:redis://127.0.0.1:6379/0", SinkOptions())

    assert sink.name == "harel"


def test_known_sinks_lists_built_ins_and_python() -> None:
    """known_sinks() is the entry-point names plus the python: resolver."""
    known = known_sinks()

    assert {"harel", "jsonl", "log", "null", "python", "redis-stream", "webhook"} <= set(known)
    assert sorted(known) == known


def test_python_path_resolves_a_factory_with_its_params() -> None:
    """python:module:factory calls the factory with the parsed spec and the options."""
    options = SinkOptions(output_format="cloudevents")

    sink = resolve_sink(f"python:{__name__}:make_recording?level=3", options)

    assert isinstance(sink, RecordingSink)
    assert SinkSpec("python", f"{__name__}:make_recording", {"level": "3"}) == sink.spec
    assert options is sink.options


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("python:no_such_module_xyz:f", "cannot import 'no_such_module_xyz'"),
        (f"python:{__name__}:missing", "has no 'missing'"),
        (f"python:{__name__}:not_a_sink", "not a Sink"),
        (f"python:{__name__}:PLUGIN_DIR", "not a class or callable"),
    ],
    ids=["no-module", "no-attribute", "not-a-sink", "not-callable"],
)
def test_python_path_errors_are_config_errors(spec: str, message: str) -> None:
    """A python: path that cannot give a Sink stops start-up with one line."""
    with pytest.raises(ConfigError, match=message):
        resolve_sink(spec, SinkOptions())


def test_unknown_sink_lists_the_known_ones() -> None:
    """An unregistered name is UnknownSink, naming what is known."""
    with pytest.raises(UnknownSink) as info:
        resolve_sink("carrier-pigeon:coop", SinkOptions())

    assert info.value.scheme == "carrier-pigeon"
    assert set(known_sinks()) == set(info.value.known)
    assert f"known: {', '.join(sorted(known_sinks()))}" in str(info.value)


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test plugin distribution, really built and installed into a private directory."""
    site = tmp_path_factory.mktemp("plugin-site")
    build = tmp_path_factory.mktemp("plugin-build")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", *PIP_OFFLINE, "--target", str(site), str(PLUGIN_DIR)],
        check=True,
        cwd=build,
        capture_output=True,
    )
    return site


async def test_plugin_distribution_resolves_by_name(
    plugin_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed distribution declaring relayd.sinks:testsink is found by name via importlib.metadata."""
    monkeypatch.syspath_prepend(str(plugin_site))
    assert any(p.name.startswith("relayd_test_sink-") for p in plugin_site.glob("*.dist-info"))

    sink = resolve_sink("testsink:some/target", SinkOptions())
    await sink.start()
    outcomes = await sink.deliver(Batch.of([outbox("p", 1, "t1"), outbox("p", 2, "t2")]))
    await sink.close()

    assert "testsink" in known_sinks()
    assert type(sink).__module__ == "relayd_test_sink"
    assert sink.target == "some/target"  # type: ignore[attr-defined]
    assert list(outcomes) == [DELIVERED, DELIVERED]
    assert sink.ids == ["p:outbox:1", "p:outbox:2"]  # type: ignore[attr-defined]


EXAMPLE_DIR = Path(__file__).parents[3] / "deploy" / "plugin-example"


@pytest.mark.slow
async def test_deploy_plugin_example_installs_and_works(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The documented example plugin builds, registers sqlite under relayd.sinks, and stores envelopes."""
    site = tmp_path_factory.mktemp("example-site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", *PIP_OFFLINE, "--target", str(site), str(EXAMPLE_DIR)],
        check=True,
        capture_output=True,
    )
    monkeypatch.syspath_prepend(str(site))
    db = tmp_path / "out.db"

    sink = resolve_sink(f"sqlite:{db}", SinkOptions())
    await sink.start()
    outcomes = await sink.deliver(Batch.of([outbox("p", 1, "a"), outbox("p", 1, "a"), outbox("p", 2, "b")]))
    await sink.close()

    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT id, kind FROM envelopes ORDER BY id").fetchall()
    conn.close()
    assert list(outcomes) == [DELIVERED] * 3
    assert rows == [("p:outbox:1", "outbox"), ("p:outbox:2", "outbox")]


@dataclass(frozen=True, slots=True)
class PigeonOptions:
    """A plugin's own options, declared as the built-in sinks declare theirs."""

    prefix: ClassVar[str] = "pigeon"

    loft: str = option("home", "Where the pigeons fly from.")
    birds: int = option(1, "How many fly at once.", constraints={"ge": 1})


class PigeonSink(RecordingSink):
    name = "pigeon"
    options_class = PigeonOptions


def test_a_plugin_gets_its_own_options_from_sink_option_over_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--sink-option pigeon.birds=3`` wins over ``RELAYD_PIGEON_BIRDS``; the loft comes from its
    variable; the factory sees the common options and its own, not another sink's."""
    monkeypatch.setenv("RELAYD_PIGEON_BIRDS", "7")
    monkeypatch.setenv("RELAYD_PIGEON_LOFT", "roof")
    settings = load_settings(sink_option=["pigeon.birds=3", "other.key=x"], format="cloudevents")

    sink = resolve_sink(f"python:{__name__}:PigeonSink", settings.sink_options())

    assert isinstance(sink, PigeonSink)
    assert sink.options.own == PigeonOptions(loft="roof", birds=3)
    assert sink.options.output_format == "cloudevents"
    assert sink.options.own_for is None


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (
            ["pigeon.wings=2"],
            "--sink-option pigeon.wings: sink 'pigeon' has no option 'wings' (it has: birds, loft)",
        ),
        (
            ["pigeon.birds=0"],
            "invalid --sink-option pigeon.birds (RELAYD_PIGEON_BIRDS): Input should be greater than or",
        ),
        (["pigeon-birds"], "--sink-option needs NAME.KEY=VALUE, got 'pigeon-birds'"),
    ],
)
def test_a_bad_plugin_option_is_one_config_error_naming_it(items: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_sink(f"python:{__name__}:PigeonSink", load_settings(sink_option=items).sink_options())

    assert str(info.value).startswith(message)


async def test_a_plugin_s_secret_file_joins_the_settings_watched_files_and_secrets(tmp_path: Path) -> None:
    """Resolving the plugin loads its options; its file is then one of ``watched_files()`` (which
    ``relayd sweep`` watches after resolving) and a check of it reaches the plugin's next batch."""
    token = tmp_path / "token"
    token.write_text("t0k3n-1\n")
    out = tmp_path / "out"
    settings = load_settings(sink_option=[f"tokens.token_file={token}", f"tokens.out={out}"])
    sink = resolve_sink("python:plugins.token_sink:TokenSink", settings.sink_options())
    watched = settings.watched("--sink-option tokens.token_file")
    assert watched is not None
    assert watched in settings.watched_files()

    token.write_text("t0k3n-2\n")
    assert watched.check() == "reloaded"
    await sink.deliver(Batch.of([outbox("p", 1, "t1")]))

    assert out.read_text() == '{"id":"p:outbox:1","token":"t0k3n-2"}\n'
    assert "t0k3n-2" in settings.secrets()


def test_a_built_in_sink_gets_only_its_own_family_s_options(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t0k3n\n")
    settings = load_settings(kafka_sasl_mechanism="PLAIN", nats_token_file=token)

    sink = resolve_sink("kafka:127.0.0.1:9092?topic=t", settings.sink_options())

    assert isinstance(sink, KafkaSink)
    assert sink._options.own == KafkaOptions(sasl_mechanism="PLAIN")
    assert sink._options.own_for is None


def test_a_family_package_names_its_sink_classes_and_loads_them_on_first_use() -> None:
    code = (
        "import sys, relayd.sinks.kafka as family\n"
        "assert 'relayd.sinks.kafka.sink' not in sys.modules\n"
        "from relayd.sinks.kafka.sink import KafkaSink\n"
        "assert family.KafkaSink is KafkaSink\n"
        "try:\n    family.NoSuchSink\nexcept AttributeError as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)

    assert (done.returncode, done.stdout.strip()) == (
        0,
        "module 'relayd.sinks.kafka' has no attribute 'NoSuchSink'",
    ), done.stderr
