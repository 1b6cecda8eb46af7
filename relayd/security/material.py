"""Secret and certificate material read from a mounted file, re-read when the file changes.

A ``WatchedFile`` reads its file once when it is made (a file that cannot be read or parsed
then is a ``ValueError`` naming the option: relayd does not start), keeps the last good value,
and ``check()`` reads the file again: when its bytes hash differently and parse, the new value
replaces the old one. The path is opened anew on every check, so a plain rewrite, an
``os.replace`` and the kubelet's flip of a Secret volume's ``..data`` symlink all count.

A file that becomes unreadable (gone, a directory, a dangling symlink), empty or unparsable
is refused: the old value stays in use and ``problem`` says why, naming the option and the
path, never the content, until the file holds good material again.

No logging and no clock here: ``relayd.security.watch`` checks the files on an interval and
on demand, logs and counts each change. ``Fixed`` is a value that never changes, for callers
that have no file (tests, ``relayd bench``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Generic, Literal, Protocol, TypeVar

from relayd.security.secret import secret_lines, strip_secret

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

#: What one ``check()`` found: the same material, new material now in use, or a file refused.
CheckOutcome = Literal["unchanged", "reloaded", "refused", "restored"]


class Material(Protocol[T_co]):
    """Anything that hands out the current value of some material (``WatchedFile``, ``Fixed``)."""

    @property
    def value(self) -> T_co: ...


class Fixed(Generic[T]):
    """Material that never changes."""

    __slots__ = ("_value",)

    def __init__(self, value: T) -> None:
        self._value = value

    @property
    def value(self) -> T:
        return self._value


class WatchedFile(Generic[T]):
    """A file's parsed content, the last good one; see the module docstring."""

    def __init__(self, option: str, path: Path, parse: Callable[[bytes], T]) -> None:
        self.option = option
        self.path = path
        self._parse = parse
        raw, reason = self._read()
        if reason is not None:
            raise ValueError(f"{option}: {reason}")
        assert raw is not None
        try:
            self._value = parse(raw)
        except ValueError as exc:
            raise ValueError(f"{option}: {exc}") from None
        self._digest = hashlib.sha256(raw).digest()
        self._refused: str | None = None
        #: How many times new material replaced the old one (a cache key for derived objects).
        self.generation = 0

    @property
    def value(self) -> T:
        return self._value

    @property
    def problem(self) -> str | None:
        """Why the file's current content is refused (the old value is still used), or None."""
        return self._refused

    def check(self) -> CheckOutcome:
        """Read the file again; take its content when it changed and is good."""
        raw, reason = self._read()
        if raw is not None:
            digest = hashlib.sha256(raw).digest()
            if digest == self._digest:
                return self._accepted("unchanged")
            try:
                value = self._parse(raw)
            except ValueError as exc:
                reason = str(exc)
            else:
                self._value, self._digest = value, digest
                self.generation += 1
                self._refused = None
                return "reloaded"
        return self._refuse(f"{self.option}: {reason}")

    def _accepted(self, outcome: CheckOutcome) -> CheckOutcome:
        if self._refused is None:
            return outcome
        self._refused = None
        return "restored"

    def _refuse(self, problem: str) -> CheckOutcome:
        if problem == self._refused:
            return "unchanged"  # refused already, for the same reason: nothing new to report
        self._refused = problem
        return "refused"

    def _read(self) -> tuple[bytes | None, str | None]:
        shown = repr(str(self.path))
        try:
            return self.path.read_bytes(), None
        except IsADirectoryError:
            return None, f"cannot read {shown}: it is a directory"
        except OSError as exc:
            return None, f"cannot read {shown}: {exc.strerror or type(exc).__name__}"


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("is not UTF-8 text") from None


def parse_secret(raw: bytes) -> str:
    """One secret: the file's text without surrounding whitespace; empty is refused."""
    value = strip_secret(_text(raw))
    if not value:
        raise ValueError("is empty")
    return value


def parse_secret_lines(raw: bytes) -> tuple[str, ...]:
    """Several secrets, one a line (each stripped, blank lines skipped); none is refused."""
    values = secret_lines(_text(raw))
    if not values:
        raise ValueError("is empty")
    return values


def parse_pem(raw: bytes) -> bytes:
    """PEM material (a CA bundle, a certificate or a key): checked for a PEM block only."""
    if b"-----BEGIN " not in raw:
        raise ValueError("holds no PEM block")
    return raw


def secret_file(option: str, path: Path) -> WatchedFile[str]:
    """A watched one-secret file; a ``ValueError`` naming the option and path when it is bad."""
    return WatchedFile(option, path, _named(option, path, parse_secret))


def secret_lines_file(option: str, path: Path) -> WatchedFile[tuple[str, ...]]:
    """A watched file of one secret a line."""
    return WatchedFile(option, path, _named(option, path, parse_secret_lines))


def pem_file(option: str, path: Path) -> WatchedFile[bytes]:
    """A watched PEM file (CA bundle, certificate or key)."""
    return WatchedFile(option, path, _named(option, path, parse_pem))


def text_file(option: str, path: Path, parse: Callable[[str], T]) -> WatchedFile[T]:
    """A watched UTF-8 text file whose content ``parse`` turns into a value (``ValueError`` if bad)."""
    return WatchedFile(option, path, _named(option, path, lambda raw: parse(_text(raw))))


def _named(option: str, path: Path, parse: Callable[[bytes], T]) -> Callable[[bytes], T]:
    """``parse`` whose ``ValueError`` reads ``'<path>' <reason>`` (the option is added by the caller)."""

    def parse_named(raw: bytes) -> T:
        try:
            return parse(raw)
        except ValueError as exc:
            raise ValueError(f"{str(path)!r} {exc}") from None

    return parse_named
