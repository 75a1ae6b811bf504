"""README.md stays a landing page, and no link in it or in docs/ points at nothing.

Why: the README's reference, hunts, benchmarks and findings moved into
docs/ (issue 47); a relative link that a later move breaks, or a README
that grows back into a manual, should fail here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_a_landing_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move sections into docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_reach_a_file(page: Path) -> None:
    targets = [t for t in LINK.findall(page.read_text()) if not t.startswith(("http", "#"))]
    missing = [t for t in targets if not (page.parent / t.split("#")[0]).exists()]
    assert not missing, f"{page.name}: links to nothing: {missing}"
