"""``__all__`` of the public packages lists what they export (httpx's check); the wheel's typing, version."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import types
import zipfile
from pathlib import Path

import pytest

import relayd.sinks
import store


@pytest.mark.parametrize("package", [store, relayd.sinks], ids=lambda p: p.__name__)
def test_all_equals_the_public_names(package: types.ModuleType) -> None:
    """A public name missing from ``__all__`` (or a stale entry in it) fails here."""
    public = {
        name
        for name in dir(package)  # a package that loads names lazily lists them in dir()
        if not name.startswith("_")
        and not isinstance(getattr(package, name), types.ModuleType)
        and name != "annotations"
    }

    assert sorted(package.__all__) == sorted(public)


def test_store_loads_a_name_from_its_module_only_when_asked() -> None:
    """``from store import Keyspace`` in a fresh interpreter loads no models (nor pydantic)."""
    code = (
        "import sys; from store import Keyspace; "
        "print('store.models' in sys.modules, 'pydantic' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert done.stdout.split() == ["False", "False"]


def test_an_unknown_store_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        store.Nope  # noqa: B018 - the lookup is the test


def test_the_plugin_helpers_are_relayd_sinks_names_loaded_when_asked() -> None:
    """``relayd.sinks`` names the helpers plugins share with the built-in sinks (docs/sinks.md);
    importing the package does not load their modules."""
    code = (
        "import sys, relayd.sinks; print(sorted(m for m in ('relayd.security.tls', "
        "'relayd.observability.inflight') if m in sys.modules)); "
        "from relayd.sinks import progressed, verified_context; "
        "from relayd.observability import inflight; from relayd.security import tls; "
        "print(progressed is inflight.progressed, verified_context is tls.verified_context)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert done.stdout.split("\n")[:2] == ["[]", "True True"]


def test_the_wheel_is_typed_and_versioned_from_relayd_version(tmp_path: Path) -> None:
    """``py.typed`` ships in both packages; the metadata version is ``relayd.__version__``, written once."""
    from hatchling.builders.wheel import WheelBuilder

    import relayd

    root = Path(__file__).resolve().parents[1]
    (wheel,) = WheelBuilder(str(root)).build(directory=str(tmp_path), versions=["standard"])
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(f"relayd-{relayd.__version__}.dist-info/METADATA").decode()

    assert {"relayd/py.typed", "store/py.typed"} <= names
    assert f"\nVersion: {relayd.__version__}\n" in metadata
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert "version" not in project
    assert "version" in project["dynamic"]
