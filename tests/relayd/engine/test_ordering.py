"""Per-target head-of-line: a waiting head holds back its own target only."""

from __future__ import annotations

from relayd.engine.ordering import select_heads

# Each item: its name, its ordering key, and whether it is ready.
ITEMS = [
    ("a1", "A", False),
    ("b1", "B", True),
    ("a2", "A", True),
    ("n1", None, True),
    ("b2", "B", True),
    ("c1", "C", True),
]


def _select(items, limit=100, blocked=()):
    picked, held = select_heads(items, key=lambda i: i[1], ready=lambda i: i[2], limit=limit, blocked=blocked)
    return [p[0] for p in picked], held


def test_failing_head_holds_back_only_its_own_target():
    picked, held = _select(ITEMS)

    assert picked == ["b1", "n1", "b2", "c1"]
    assert held == {"A"}


def test_blocked_keys_from_outside_are_held():
    picked, held = _select(ITEMS, blocked={"C"})

    assert picked == ["b1", "n1", "b2"]
    assert held == {"A", "C"}


def test_limit_bounds_the_selection_in_order():
    picked, _ = _select(ITEMS, limit=2)

    assert picked == ["b1", "n1"]


def test_untargeted_entries_never_block_each_other():
    items = [("x", None, False), ("y", None, True)]

    picked, held = _select(items)

    assert picked == ["y"]
    assert held == set()
