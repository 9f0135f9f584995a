"""Relative links in the project's Markdown resolve: the file exists and a ``#fragment`` names one of its headings.

Fragments follow GitHub's heading anchors (lower case, punctuation other than ``-`` and ``_`` removed, spaces to
``-``, repeats suffixed ``-1``, ``-2``), which is where readers follow them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MARKDOWN = sorted(
    path
    for pattern in ("*.md", "docs/*.md", "examples/**/*.md", "collector/**/*.md", "dashboards/**/*.md")
    for path in ROOT.glob(pattern)
)
_LINK = re.compile(r"\]\(([^)\s]*)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors: set[str] = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            in_code = not in_code
            continue
        match = None if in_code else _HEADING.match(line)
        if match is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _links(path: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    in_code = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if _FENCE.match(line):
            in_code = not in_code
            continue
        if not in_code:  # inline code may show link syntax as an example
            found.extend((number, target) for target in _LINK.findall(re.sub(r"`[^`]*`", "", line)))
    return found


def test_the_markdown_files_are_found() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in MARKDOWN}
    assert {"README.md", "CHANGELOG.md", "docs/otel.md", "docs/gateway.md", "docs/signals.md"} <= names


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_relative_links_and_anchors_resolve(path: Path) -> None:
    broken: list[str] = []
    for number, target in _links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: — not ours to check offline
            continue
        file_part, _, fragment = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"line {number}: {target} (no such file)")
        elif fragment and linked.suffix == ".md" and fragment not in _anchors(linked):
            broken.append(f"line {number}: {target} (no heading with that anchor)")
    assert not broken, "\n".join(broken)


def test_anchor_rules_match_github() -> None:
    # The slug rules above, on headings of the shapes the docs use.
    sample = ROOT / "docs" / "signals.md"
    anchors = _anchors(sample)
    assert "diagnostics-attributes-under-ragconfidence" in anchors
    assert "hybrid-retrieval-methods-and-combinedscore" in anchors
