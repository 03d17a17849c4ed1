"""Fixtures shared by every test directory."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _no_crawlq_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The library never reads CRAWLQ_* variables; make sure no test depends on them."""
    for name in list(os.environ):
        if name.startswith("CRAWLQ_"):
            monkeypatch.delenv(name)
