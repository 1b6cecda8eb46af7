"""Fill a broker sink's name template (topic, subject, routing key) for one envelope or a batch.

Pure. ``{target}`` becomes the envelope's ordering key (the outbox target, the spawned child,
the timer's execution) or ``_`` when it has none, ``{kind}`` its kind and ``{prefix}`` its
prefix, so ``events.{prefix}.{kind}.{target}`` routes every target on its own key. ``{kind}``
and ``{prefix}`` are filled first, so a target's own text is never read as a placeholder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

#: What ``{target}`` becomes for an envelope without an ordering key.
NO_TARGET: Final = "_"
PLACEHOLDERS: Final = ("{target}", "{kind}", "{prefix}")


def is_templated(template: str) -> bool:
    """Whether ``template`` holds any placeholder (else every envelope gets it as it is)."""
    return any(placeholder in template for placeholder in PLACEHOLDERS)


def fill_template(template: str, *, kind: str, prefix: str) -> str:
    """``template`` with ``{kind}`` and ``{prefix}`` filled in (``{target}`` stays)."""
    return template.replace("{kind}", kind).replace("{prefix}", prefix)


def fill_targets(template: str, keys: Sequence[str | None]) -> list[str]:
    """One name per ordering key: ``template`` with ``{target}`` filled in (``_`` for no key)."""
    if "{target}" not in template:
        return [template] * len(keys)
    head, _, tail = template.partition("{target}")
    if "{target}" in tail:
        return [template.replace("{target}", key or NO_TARGET) for key in keys]
    return [f"{head}{key or NO_TARGET}{tail}" for key in keys]


def fill(template: str, *, target: str | None, kind: str, prefix: str) -> str:
    """``template`` with ``{target}``, ``{kind}`` and ``{prefix}`` replaced."""
    partial = fill_template(template, kind=kind, prefix=prefix)
    return partial.replace("{target}", target if target is not None else NO_TARGET)


def fill_all(
    template: str, *, targets: Sequence[str | None], kind: str, prefixes: Sequence[str]
) -> list[str]:
    """``fill`` for every entry of a batch of one ``kind``, given as columns."""
    if not is_templated(template):
        return [template] * len(targets)
    return [
        fill(template, target=target, kind=kind, prefix=prefix)
        for target, prefix in zip(targets, prefixes, strict=True)
    ]
