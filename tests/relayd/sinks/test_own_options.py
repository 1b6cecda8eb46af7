"""A sink's own options: names built from its class, loaded from flags over variables, files read."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import pytest

from relayd.config.sink_settings import load_own_options, load_plugin_options
from relayd.errors import ConfigError
from relayd.security.material import Material, secret_file
from relayd.sinks.own_options import content_of, envvar, flag, option, watched


def _shouted(source: Material[str], values: dict[str, Any]) -> str:
    return source.value.upper() if values["loud"] else source.value


@dataclass(frozen=True, slots=True)
class OwlOptions:
    prefix: ClassVar[str] = "owl"

    hoot_file: Path | None = option(None, "File holding the hoot.", reads=watched(secret_file), secret=True)
    loud: bool = option(False, "Hoot loudly.")
    night_s: float = option(1.0, "Seconds of night.", constraints={"gt": 0, "le": 10}, wire="night.ms")

    hoot: str | None = content_of("hoot_file", _shouted)


def test_the_flag_and_variable_come_from_the_prefix_and_the_field() -> None:
    assert (flag(OwlOptions, "hoot_file"), envvar(OwlOptions, "hoot_file")) == (
        "--owl-hoot-file",
        "RELAYD_OWL_HOOT_FILE",
    )


def test_a_sink_may_keep_its_own_metadata_on_an_option() -> None:
    (night,) = (field for field in fields(OwlOptions) if field.name == "night_s")

    assert night.metadata["wire"] == "night.ms"
    assert night.metadata["help"] == "Seconds of night."


def test_a_flag_wins_over_its_variable_and_a_file_is_read_through_its_view(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hoot = tmp_path / "hoot"
    hoot.write_text(" whoo \n")
    monkeypatch.setenv("RELAYD_OWL_NIGHT_S", "9")
    monkeypatch.setenv("RELAYD_OWL_LOUD", "yes")

    loaded = load_own_options(OwlOptions, {"owl_night_s": 2.5, "owl_hoot_file": hoot})

    assert loaded.options == OwlOptions(hoot_file=hoot, loud=True, night_s=2.5)
    assert loaded.options.hoot == "WHOO"
    assert [file.option for file in loaded.files] == ["--owl-hoot-file"]
    assert loaded.secret_options == {"--owl-hoot-file"}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"owl_night_s": 0}, "invalid --owl-night-s (RELAYD_OWL_NIGHT_S): Input should be greater than 0"),
        ({"owl_hoot_file": Path("/nowhere/hoot")}, "--owl-hoot-file: cannot read"),
    ],
)
def test_a_bad_value_or_file_is_one_line_naming_the_option(flags: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_own_options(OwlOptions, flags)

    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_a_plugin_s_file_is_read_and_watched_as_a_built_in_s_named_as_it_is_set(tmp_path: Path) -> None:
    """The same loading as a family's flags; only the name differs: ``--owl-hoot-file`` is no flag."""
    hoot = tmp_path / "hoot"
    hoot.write_text("whoo\n")

    loaded = load_plugin_options(OwlOptions, [f"owl.hoot_file={hoot}", "owl.loud=yes"])

    assert loaded.options.hoot == "WHOO"
    assert [file.option for file in loaded.files] == ["--sink-option owl.hoot_file"]
    assert loaded.secret_options == {"--sink-option owl.hoot_file"}
    with pytest.raises(ConfigError) as info:
        load_plugin_options(OwlOptions, ["owl.hoot_file=/nowhere/hoot"])
    assert str(info.value).startswith("--sink-option owl.hoot_file: cannot read '/nowhere/hoot'")
