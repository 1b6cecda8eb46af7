"""``__all__`` of the public packages lists exactly what they export (httpx's check)."""

from __future__ import annotations

import subprocess
import sys
import types

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
