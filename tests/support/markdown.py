"""Links and anchors of the project's Markdown files, resolved the way GitHub renders them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_EXPLICIT_ID = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")


def _prose(text: str) -> str:
    """The text outside fenced code blocks (headings and links inside them are not real)."""
    return _FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a page offers: heading slugs (repeats numbered ``-1``, ``-2``) and explicit ids."""
    found: set[str] = set(_EXPLICIT_ID.findall(text))
    seen: dict[str, int] = {}
    for line in _prose(text).splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(text: str) -> Iterator[str]:
    """Every link target that is not a URL with a scheme (``http:``, ``mailto:``)."""
    for target in _LINK.findall(_INLINE_CODE.sub("", _prose(text))):
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target):
            yield target


def unresolved(target: str, source: Path) -> str | None:
    """Why ``target`` (a link in ``source``) does not resolve, or None when it does."""
    path_part, _, anchor = target.partition("#")
    path = (source.parent / path_part).resolve() if path_part else source
    if not path.exists():
        return f"{source.name}: {target}: no such file"
    if anchor and (path.suffix != ".md" or anchor not in anchors(path.read_text())):
        return f"{source.name}: {target}: no such anchor"
    return None
