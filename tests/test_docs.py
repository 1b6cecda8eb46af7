"""The user documentation holds together: every relative link and anchor resolves."""

from __future__ import annotations

from pathlib import Path

from support.markdown import anchors, relative_links, slug, unresolved

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_every_relative_link_and_anchor_in_the_docs_resolves() -> None:
    """A renamed heading or a moved page fails here until every link to it follows."""
    broken = [
        problem
        for page in PAGES
        for target in relative_links(page.read_text())
        if (problem := unresolved(target, page))
    ]

    assert broken == []


def test_the_docs_link_to_each_other() -> None:
    """Each page in docs/ is reachable from the README, directly or through another page."""
    linked = {
        (page.parent / target.partition("#")[0]).resolve()
        for page in PAGES
        for target in relative_links(page.read_text())
        if target.partition("#")[0]
    }

    assert [page.name for page in PAGES[2:] if page.resolve() not in linked] == []


def test_slugs_follow_github_rules() -> None:
    """Punctuation and code marks drop out, case folds, spaces become hyphens, repeats count up."""
    page = "# Title\n## The envelope `relayd/1`\n## What, and why?\n## Repeat\n## Repeat\n```\n# not\n```\n"

    assert slug("What relayd guarantees, and what it does not") == (
        "what-relayd-guarantees-and-what-it-does-not"
    )
    assert anchors(page) == {"title", "the-envelope-relayd1", "what-and-why", "repeat", "repeat-1"}


def test_a_broken_link_or_anchor_is_reported(tmp_path: Path) -> None:
    """The checker itself fails on a missing page and on a missing anchor."""
    page = tmp_path / "a.md"
    page.write_text("# A\n[x](b.md) [y](#nowhere) [z](#a) [w](https://example.invalid/#q)\n")

    problems = [p for t in relative_links(page.read_text()) if (p := unresolved(t, page))]

    assert problems == ["a.md: b.md: no such file", "a.md: #nowhere: no such anchor"]
