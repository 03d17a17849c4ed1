"""The documentation points only at what the repository holds: every relative link and
every file name in backticks resolves inside it, and every #anchor names a heading."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
NAMED_FILE = re.compile(r"`([\w./-]+\.(?:md|py|sql|lua|toml))`")


@cache
def tracked() -> frozenset[str]:
    """The repository's files, as paths from its root."""
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    return frozenset(out.stdout.splitlines())


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for the headings of ``page``."""
    found = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_and_file_names_stay_inside_the_repository(page: Path) -> None:
    text = page.read_text()
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.is_relative_to(ROOT), f"{page.name} links outside: {target}"
        assert resolved.exists(), f"{page.name} links to a missing file: {target}"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved), f"{page.name}: no heading for {target}"
    for name in NAMED_FILE.findall(text):
        here = any(f == name or f.endswith("/" + name) for f in tracked())
        assert here, f"{page.name} names {name!r}, which is not in the repository"
