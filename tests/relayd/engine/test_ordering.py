"""Per-target head-of-line: a waiting head holds back its own target only."""

from __future__ import annotations

from relayd.engine.ordering import select_heads, split_fresh

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


def _split(items, blocked=(), history=()):
    blocked = set(blocked)
    fast, slow = split_fresh(
        items, key=lambda i: i[1], has_history=lambda i: i[0] in history, blocked=blocked
    )
    return [f[0] for f in fast], [s[0] for s in slow], blocked


def test_fresh_items_without_history_or_blocked_key_all_go_fast():
    expected: tuple[list[str], list[str], set[str]] = (["a1", "b1", "a2", "n1", "b2", "c1"], [], set())

    assert expected == _split(ITEMS)


def test_a_blocked_key_sends_its_items_to_the_line():
    expected = (["b1", "n1", "b2", "c1"], ["a1", "a2"], {"A"})

    assert expected == _split(ITEMS, blocked={"A"})


def test_an_item_with_history_queues_every_later_item_of_its_key():
    """b1 had a failed attempt before: b2 must not overtake it, other keys still go fast."""
    expected = (["a1", "a2", "n1", "c1"], ["b1", "b2"], {"B"})

    assert expected == _split(ITEMS, history={"b1"})


def test_an_untargeted_item_with_history_blocks_nothing():
    expected: tuple[list[str], list[str], set[str]] = (["a1", "b1", "a2", "b2", "c1"], ["n1"], set())

    assert expected == _split(ITEMS, history={"n1"})
