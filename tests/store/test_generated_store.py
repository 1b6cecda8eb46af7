"""The sync store is generated from the asyncio one (``store._generate``), so the twins cannot drift."""

from __future__ import annotations

import ast

import pytest

from store import _generate

SOURCE = (_generate.ROOT / _generate.SOURCE).read_text()


def test_the_committed_sync_store_is_the_generator_s_output() -> None:
    """A hand edit of ``store/redis_store.py``, or an async change not generated again, fails here:
    run ``make generate`` (``python -m store._generate``) and commit both files."""
    committed = (_generate.ROOT / _generate.TARGET).read_text()

    assert _generate.generate(SOURCE) == committed


def test_the_generated_store_says_where_it_comes_from_and_has_no_async_left() -> None:
    text = _generate.generate(SOURCE)
    tree = ast.parse(text)
    asynchronous = ast.AsyncFunctionDef | ast.Await | ast.AsyncWith | ast.AsyncFor

    assert text.startswith(f"# Generated from {_generate.SOURCE} by `{_generate.COMMAND}`")
    assert not [node for node in ast.walk(tree) if isinstance(node, asynchronous)]
    assert "Async" not in text
    assert "asyncio" not in text
    assert "unasync:" not in text  # the async-only blocks and their markers are left out


def test_an_async_only_block_left_open_is_refused() -> None:
    with pytest.raises(ValueError, match="without"):
        _generate.generate(f"x = 1\n{_generate.BEGIN_ASYNC_ONLY}\ny = 2\n")
