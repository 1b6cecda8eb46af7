"""``__all__`` of the public packages lists exactly what they export (httpx's check)."""

from __future__ import annotations

import types

import pytest

import relayd.sinks
import store


@pytest.mark.parametrize("package", [store, relayd.sinks], ids=lambda p: p.__name__)
def test_all_equals_the_public_names(package: types.ModuleType) -> None:
    """A public name missing from ``__all__`` (or a stale entry in it) fails here."""
    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }

    assert sorted(package.__all__) == sorted(public)
