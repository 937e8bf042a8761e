"""Every relative link in the project's Markdown resolves to a file or folder of the repository.

Reports move (docs/results/), guides link into them, and generated reports link to their own plots; a link
left pointing at an old path is found here, not by a reader. A ``#anchor`` into a Markdown file must name one
of its headings, as GitHub spells them. Links to web pages are not checked.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dipper.config import REPO_ROOT

# Files a link may name before they exist, each with who writes it.
PENDING = {
    REPO_ROOT / "docs" / "tests.md",  # per-test times, written by a command of its own (docs/design.md, "Test tiers")
}

# [text](target) and ![alt](target); the target ends at the first space (a title may follow) or ')'.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")


def markdown_files() -> list[Path]:
    files = [REPO_ROOT / "README.md", REPO_ROOT / "CHANGELOG.md"]
    files += sorted((REPO_ROOT / "docs").rglob("*.md"))
    return [f for f in files if f.is_file()]


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of each link outside code blocks and code spans."""
    found, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for match in LINK.finditer(CODE_SPAN.sub("", line)):
            found.append((number, match.group(1)))
    return found


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings: lower case, punctuation dropped, spaces as hyphens,
    a repeated one numbered."""
    seen: dict[str, int] = {}
    out, fenced = set(), False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken(path: Path) -> list[str]:
    out = []
    for number, target in links(path.read_text(encoding="utf-8")):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # http:, https:, mailto:
        name, _, anchor = target.partition("#")
        resolved = (path.parent / name.split("?", 1)[0]).resolve() if name else path
        if not resolved.exists():
            if resolved not in PENDING:
                out.append(f"{path.relative_to(REPO_ROOT)}:{number}: {target}")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text(encoding="utf-8")):
            out.append(f"{path.relative_to(REPO_ROOT)}:{number}: {target} (no such heading)")
    return out


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    assert broken(path) == []


def test_anchors_are_spelled_as_github_spells_them() -> None:
    text = "# Dipper\n## 2. From nothing to `EXPLAIN`, and why\n```\n# not a heading\n```\n## Notes\n## Notes"
    assert anchors(text) == {"dipper", "2-from-nothing-to-explain-and-why", "notes", "notes-1"}


def test_the_checker_sees_links_but_not_code() -> None:
    text = 'see [a](x.md#top) and ![b](img.png "t")\n`[c](not.md)`\n```\n[d](nor.md)\n```\n[e](../y.md)'
    assert links(text) == [(1, "x.md#top"), (1, "img.png"), (6, "../y.md")]
