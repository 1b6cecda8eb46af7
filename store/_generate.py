"""Generate the sync store, ``store/redis_store.py``, from the asyncio one: ``python -m store._generate``.

The two stores differ only mechanically, so ``RedisStore`` is written from ``AsyncRedisStore``:

1. the blocks between ``# unasync: async only, from here`` and ``# unasync: async only, to here``
   (``aclose``) are left out;
2. unasync's token rules drop ``async`` and ``await`` (``async for``, ``async with`` too) and map
   ``__aenter__`` and its kin; ``TOKENS`` renames what unasync would not;
3. ``PHRASES`` rewrites the docstrings' words (unasync leaves the text of strings alone);
4. ruff fixes the lint the sync form alone would show (``RUFF_FIXES``) and formats the result.

Run from a checkout with the test dependencies (unasync, ruff); ``make generate`` does the same.
``tests/store/test_generated_store.py`` fails when the committed file is not this output.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import unasync

ROOT = Path(__file__).resolve().parents[1]
SOURCE = "store/async_redis_store.py"
TARGET = "store/redis_store.py"
COMMAND = "python -m store._generate"

BEGIN_ASYNC_ONLY = "# unasync: async only, from here"
END_ASYNC_ONLY = "# unasync: async only, to here"

#: Names unasync does not map itself (it would make ``AsyncRedisStore`` ``SyncRedisStore``).
TOKENS = {
    "AsyncRedisStore": "RedisStore",
    "AsyncBacklogReader": "BacklogReader",
    "async_client_from_url": "sync_client_from_url",
    "aclose": "close",
}

#: Text replacements, in order, for what unasync leaves alone: the docstrings.
PHRASES = (
    ("AsyncRedisStore", "RedisStore"),
    ("redis.asyncio-compatible", "redis-py-compatible"),
    ("asyncio", "sync"),
)

#: Ruff rules whose fixes the sync form needs: the import order after the renames (I001), a
#: ``with`` around what was an ``async with`` (SIM117), and a comprehension that was an
#: ``async for`` one (C416, whose fix ruff counts as unsafe in general; a list of an iterator here).
RUFF_FIXES = "I001,SIM117,C416"

HEADER = (
    f"# Generated from {SOURCE} by `{COMMAND}` (`make generate`).\n"
    f"# Do not edit by hand: change {SOURCE} and generate this file again.\n"
)


def _without_async_only(source: str) -> str:
    kept: list[str] = []
    inside = False
    for line in source.splitlines(keepends=True):
        marker = line.strip()
        if marker == BEGIN_ASYNC_ONLY:
            inside = True
        elif marker == END_ASYNC_ONLY:
            inside = False
        elif not inside:
            kept.append(line)
    if inside:
        raise ValueError(f"{BEGIN_ASYNC_ONLY!r} without {END_ASYNC_ONLY!r}")
    return "".join(kept)


def _unasync(source: str) -> str:
    """unasync's own rules over ``source`` (it works on files: these are temporary)."""
    with tempfile.TemporaryDirectory() as tmp:
        original = Path(tmp, "_async", "module.py")
        original.parent.mkdir()
        original.write_text(source)
        unasync.unasync_files([str(original)], [unasync.Rule("/_async/", "/_sync/", TOKENS)])
        return Path(tmp, "_sync", "module.py").read_text()


def _ruff(*args: str, source: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--stdin-filename", TARGET, "-"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,  # the project's ruff settings
    )
    return done.stdout


def generate(source: str) -> str:
    """The text of ``store/redis_store.py`` for ``source``, the text of the asyncio store."""
    text = _unasync(_without_async_only(source))
    for old, new in PHRASES:
        text = text.replace(old, new)
    text = _ruff("check", "--select", RUFF_FIXES, "--fix", "--unsafe-fixes", "--exit-zero", source=text)
    return HEADER + _ruff("format", source=text)


def main() -> None:
    target = ROOT / TARGET
    text = generate((ROOT / SOURCE).read_text())
    if target.read_text() == text:
        print(f"{TARGET} is up to date")
        return
    target.write_text(text)
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
