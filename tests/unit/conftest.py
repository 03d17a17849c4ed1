from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import crawlq


@pytest.fixture
def app(tmp_path: Path) -> Iterator[crawlq.App]:
    """An App on a fresh SQLite file."""
    application = crawlq.App(f"sqlite:///{tmp_path / 'jobs.db'}")
    yield application
    application.close()
