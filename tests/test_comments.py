"""Comments and docstrings say why, not what was measured: no figures, no issue numbers.

Nor do they cite a document outside the repository: a contract the code relies on is written in
docs/internals.md (or the README, docs/sinks.md, docs/metrics.md) and cited there.

Figures go stale on a machine whose speed drifts, and say what was measured rather than why the
code is as it is: they belong in docs/performance.md and commit messages. A comment names the
benchmark that shows its reason instead.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: A measurement or a tracker reference: an issue number, a rate, a percentage, a before -> after,
#: a cost in microseconds or nanoseconds.
FIGURE = re.compile(
    r"(?i)issue ?#?\d+"
    r"|\d[\d.,]*\s?k?\s?(entries|timers|commits)/s"
    r"|\d(\.\d+)?\s?%"
    r"|\d[\d.,]*k?\s?(->|→)\s?\d"
    r"|\d(\.\d+)?\s?(µs|us|ns)\b"
)


def _texts(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and every docstring-like string statement."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            for offset, line in enumerate(node.value.value.splitlines()):
                yield node.lineno + offset, line


def _python_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    return listed.stdout.split()


def figures_in(source: str) -> list[tuple[int, str]]:
    if not FIGURE.search(source):
        return []  # most files: nothing that even looks like a figure, no need to tokenize
    return sorted((line, text.strip()) for line, text in _texts(source) if FIGURE.search(text))


def test_no_comment_or_docstring_quotes_a_figure_or_an_issue() -> None:
    found = [
        f"{path}:{line}: {text}"
        for path in _python_files()
        for line, text in figures_in((ROOT / path).read_text())
    ]

    assert found == []


def test_the_check_finds_figures_in_comments_and_docstrings_but_not_in_code() -> None:
    source = '''"""Module: 71.2k -> 80.5k entries/s."""
LIMIT = 1000  # fine: a parameter
RATE = "9.5 us"  # faster by 8 % (issue 6)


def f() -> None:
    """Costs 1.68 us an entry."""
'''

    assert [line for line, _ in figures_in(source)] == [1, 3, 7]


#: A citation of a section of a design document that is not in the repository (DESIGN or STYLE,
#: then the section sign, raw or JSON-escaped, then a number).
OUTSIDE_CITATION = re.compile(r"\b(DESIGN|STYLE) ?(§|\\u00a7)")


def outside_citations(text: str) -> list[tuple[int, str]]:
    return [
        (number, line.strip())
        for number, line in enumerate(text.splitlines(), 1)
        if OUTSIDE_CITATION.search(line)
    ]


def test_no_tracked_file_cites_a_document_outside_the_repository() -> None:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    found = []
    for path in listed.stdout.decode().split("\0"):
        if not path or not (ROOT / path).is_file():
            continue
        try:
            text = (ROOT / path).read_text()
        except UnicodeDecodeError:
            continue  # a binary file: an image, a wheel
        found += [f"{path}:{line}: {cited}" for line, cited in outside_citations(text)]

    assert found == []


def test_the_citation_check_finds_design_sections_in_any_file() -> None:
    cited = "DESIGN" + " \N{SECTION SIGN}6"  # spelled apart so this file does not cite it itself
    escaped = "DESIGN" + " \\u00a76"
    text = f'# Alerting rules ({cited} metrics).\nsee docs/internals.md#key-space\n"({escaped})"\n'

    assert [line for line, _ in outside_citations(text)] == [1, 3]
