"""The README's and docs' links within the project: each names a page that exists, and a heading on it."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def heading_anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces made hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings (a `#` line inside a code block is no heading)."""
    prose = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    return {heading_anchor(heading) for heading in re.findall(r"^#+ (.*)$", prose, re.MULTILINE)}


def test_every_link_within_the_project_names_a_page_that_exists_and_a_heading_on_it():
    broken = []
    for page in PAGES:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]+))?\)", page.read_text()):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            destination = (page.parent / target).resolve() if target else page
            if not destination.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
                broken.append(f"{page.relative_to(REPO)}: {target}#{anchor} (no such heading)")
    assert broken == []
