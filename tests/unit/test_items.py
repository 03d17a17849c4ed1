"""The parse hook's results (``crawlq.crawler.items``) and how they are written
(``crawlq.crawler.exports``)."""

from __future__ import annotations

import asyncio
import csv
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from crawlq.crawler.exports import write_all
from crawlq.crawler.items import Page, Parsed, load_hook, run_hook
from crawlq.crawler.links import parse_html
from crawlq.exceptions import ConfigurationError

BODY = b'<title>T</title><h1>Hi</h1><a href="/next">n</a><a href="mailto:x@y">m</a>'


def page() -> Page:
    return Page(
        url="http://a.example/p", final_url="http://a.example/p", status=200, headers={},
        body=BODY, content_type="text/html", depth=0, referrer=None, tree=parse_html(BODY),
    )  # fmt: skip


@pytest.fixture
def hooks(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("test_hooks_module")
    monkeypatch.setitem(sys.modules, "test_hooks_module", module)
    return module


def run(hooks: types.ModuleType, function: Any) -> Parsed:
    name = f"f{id(function)}"
    setattr(hooks, name, function)
    return asyncio.run(run_hook(f"test_hooks_module:{name}", page()))


def test_a_hook_may_return_one_item_many_a_generator_or_parsed(hooks: types.ModuleType) -> None:
    assert run(hooks, lambda p: None) == Parsed(items=[], links=None)
    assert run(hooks, lambda p: {"h": p.select_one("h1::text")}).items == [{"h": "Hi"}]

    def generate(p: Page) -> Any:
        yield {"n": 1}
        yield {"n": (2, 3)}

    assert run(hooks, generate).items == [{"n": 1}, {"n": [2, 3]}]

    async def links(p: Page) -> Parsed:
        return Parsed(items=[{"a": 1}], links=["/x", "mailto:y@z", "http://b.example/"])

    parsed = run(hooks, links)
    assert parsed.links == ["http://a.example/x", "http://b.example/"]


@pytest.mark.parametrize(
    ("result", "message"),
    [
        ("text", "the parse hook returned a str"),
        ([1], "item 0 is a int, not a dict"),
        ([{"x": object()}], "is not JSON serializable"),
        ([{"x": float("nan")}], "Out of range float"),
        ([{"x": "\ud800"}], "surrogates not allowed"),
    ],
)
def test_what_is_not_items_is_an_error(hooks: types.ModuleType, result: Any, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        run(hooks, lambda p: result)


def test_a_hook_that_cannot_be_loaded_is_refused_in_one_line(hooks: types.ModuleType) -> None:
    with pytest.raises(ConfigurationError, match="module 'test_hooks_module' has no 'nope'"):
        load_hook("test_hooks_module:nope")
    hooks.value = 3
    with pytest.raises(ConfigurationError, match="'value' is not a function"):
        load_hook("test_hooks_module:value")
    with pytest.raises(ConfigurationError, match="no module named 'no_such_hooks'"):
        load_hook("no_such_hooks:parse")


def test_csv_of_items_has_every_key_and_json_cells(tmp_path: Path) -> None:
    records = [
        json.dumps({"url": "u1", "items": [{"a": 1, "b": "x"}]}),
        json.dumps({"url": "u2", "items": None}),
        json.dumps({"url": "u3", "items": [{"a": None, "c": [1, "y"], "d": True}]}),
    ]
    out = tmp_path / "items.csv"
    assert write_all(str(out), None, lambda: records, items=True) == 2
    with out.open(newline="") as f:
        rows = list(csv.reader(f))
    assert rows == [["a", "b", "c", "d"], ["1", "x", "", ""], ["", "", '[1,"y"]', "true"]]
