"""The ``store`` fixture: every test in tests/stores runs once per entry of
``STORE_FACTORIES``, each on a fresh, isolated store that is closed at teardown."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from store_helpers import STORE_FACTORIES

from crawlq.stores.base import Store

OpenStore = Callable[[], Store]


@pytest.fixture(params=sorted(STORE_FACTORIES))
def store_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def open_same_store(store_name: str, tmp_path: Path) -> Iterator[OpenStore]:
    """Open Store objects on this test's data; each call is a new, independent one (as
    another process would be). All of them are closed at teardown."""
    opened: list[Store] = []

    def open_one() -> Store:
        store = STORE_FACTORIES[store_name](tmp_path)
        opened.append(store)
        return store

    yield open_one
    for store in reversed(opened):
        store.close()


@pytest.fixture
def store(open_same_store: OpenStore) -> Store:
    """A fresh, empty store of the parametrized kind."""
    return open_same_store()
