"""Fixtures of the web tests: a store of each kind, an App on it and a TestClient."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="crawlq[web] is not installed")

from starlette.testclient import TestClient

from crawlq.app import App
from crawlq.stores.base import Store
from crawlq.web import create_app
from tests.stores.store_helpers import STORE_FACTORIES


@pytest.fixture(params=sorted(STORE_FACTORIES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened = STORE_FACTORIES[request.param](tmp_path)
    yield opened
    opened.close()


@pytest.fixture
def app(store: Store) -> App:
    app = App(store)

    @app.task(name="fetch", queue="pages", max_attempts=1)
    def fetch(ctx: Any, url: str) -> None:
        raise ValueError(f"cannot fetch {url}")

    @app.task(name="parse", queue="parse")
    def parse(ctx: Any, n: int) -> None:
        pass

    return app


@pytest.fixture
def client(app: App) -> Iterator[TestClient]:
    with TestClient(create_app(app), raise_server_exceptions=False) as c:
        yield c
