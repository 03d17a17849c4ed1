"""mypy checks a task's schedule and spec arguments against the task function."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

SNIPPET = """
import crawlq

app = crawlq.App("sqlite:///typing.db")


@app.task
def fetch(ctx: crawlq.JobContext, url: str, depth: int = 0) -> None: ...


@app.task(max_attempts=5)
def parse(ctx: crawlq.JobContext, page: int) -> int:
    ctx.schedule(fetch, "https://example.com/", 1)
    ctx.schedule(fetch.with_options(seen="https://example.com/"), "https://example.com/")
    ctx.schedule(fetch, 1)  # line 14: wrong type
    ctx.schedule("fetch", 1, 2, 3)  # by name: not checked
    return page


fetch.schedule("https://example.com/")
fetch.schedule("https://example.com/", 1)
fetch.schedule("https://example.com/", depth=2)
fetch.with_options(delay=30, key="k").schedule("https://example.com/")
fetch.with_options(priority=1).with_options(seen="x", crawl=1).spec("https://example.com/")
app.schedule_many([fetch.spec("https://example.com/"), parse.spec(3)])
fetch.delay("https://example.com/", depth=3)
fetch.schedule("https://example.com/", 1, 2)  # line 26: too many arguments
fetch.schedule(1)  # line 27: wrong type
fetch.spec()  # line 28: missing url
fetch.schedule("https://example.com/", dept=2)  # line 29: no such parameter
fetch.with_options(delya=30)  # line 30: no such option
fetch.with_options(delay="soon")  # line 31: wrong option type
parse.with_options(key="k").schedule("3")  # line 32: wrong type
fetch.delay()  # line 33: missing url


@app.task
def loose(ctx: crawlq.JobContext, url: str, **extra: int) -> None: ...


@app.task(queue="q")
def looser(ctx: crawlq.JobContext, *args: str, **extra: int) -> None: ...


loose.schedule("a", depth=1)  # a function with **kwargs is registered, unchecked
looser.with_options(key="k").schedule("a", "b", n=1)
"""

EXPECTED_ERRORS = {14, 26, 27, 28, 29, 30, 31, 32, 33}


def test_mypy_checks_schedule_arguments_against_the_task(tmp_path: Path) -> None:
    source = tmp_path / "tasks_typed.py"
    source.write_text(textwrap.dedent(SNIPPET).lstrip())
    out, err, _ = mypy_api.run(
        [
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--no-incremental",
            "--follow-imports=silent",
            str(source),
        ]
    )
    lines = {int(m) for m in re.findall(r"tasks_typed\.py:(\d+): error", out)}
    assert lines == EXPECTED_ERRORS, out + err
