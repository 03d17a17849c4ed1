from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import crawlq


@pytest.fixture(autouse=True)
def _no_crawlq_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The library never reads CRAWLQ_* variables; make sure tests do not depend on them."""
    import os

    for name in list(os.environ):
        if name.startswith("CRAWLQ_"):
            monkeypatch.delenv(name)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[crawlq.App]:
    """An App on a fresh SQLite file."""
    application = crawlq.App(f"sqlite:///{tmp_path / 'jobs.db'}")
    yield application
    application.close()
