"""examples/quickstart.py as a user runs it (a copy, so the repository stays clean)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_quickstart_scrapes_each_linked_book_once(tmp_path: Path) -> None:
    """index.html and index-2.html both link to book-1.html (and index.html to book-2
    twice): the crawl's seen set schedules each once, even after its job is done."""
    shutil.copy(EXAMPLES / "quickstart.py", tmp_path)
    shutil.copytree(EXAMPLES / "site", tmp_path / "site")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLQ_")}
    result = subprocess.run(
        [sys.executable, "quickstart.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    books = Counter(re.findall(r"^  job +\d+ \w+ +(book-\d\.html)", result.stdout, re.M))
    assert books == Counter({f"book-{n}.html": 1 for n in range(1, 6)}), result.stdout
    assert "crawl 1 finished: 6 done, 1 dead, 7 seen" in result.stdout
