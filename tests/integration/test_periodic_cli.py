"""``crawlq periodic``: add, list, pause, resume, fires and remove, in-process on a
temporary SQLite file (the firing itself is in test_periodic_workers.py)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from crawlq.cli import cli

TASKS = """
    import crawlq

    app = crawlq.App("sqlite:///not-this-one.db")

    @app.task(name="fetch", queue="pages", priority=3, max_attempts=5)
    def fetch(ctx, url):
        return url
"""


def run(store: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--store", store, *args], catch_exceptions=False)


def as_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'jobs.db'}"


def test_add_list_pause_resume_fires_remove(store: str) -> None:
    added = run(
        store,
        "periodic",
        "add",
        "refresh",
        "fetch",
        "--cron",
        "0 */6 * * *",
        "--tz",
        "Europe/Berlin",
        "--args",
        '["https://example.com/"]',
    )
    assert added.exit_code == 0, added.output
    assert added.output.startswith("schedule refresh created: cron 0 */6 * * * Europe/Berlin")
    again = run(
        store,
        "periodic",
        "add",
        "refresh",
        "fetch",
        "--cron",
        "0 */6 * * *",
        "--tz",
        "Europe/Berlin",
        "--args",
        '["https://example.com/"]',
        "--json",
    )
    assert as_json(again)["outcome"] == "unchanged"
    ping = as_json(
        run(
            store,
            "periodic",
            "add",
            "ping",
            "ping",
            "--every",
            "1h30m",
            "--no-overlap",
            "--catch-up",
            "skip",
            "--json",
        )
    )
    assert (ping["every"], ping["overlap"], ping["catch_up"]) == (5400.0, False, "skip")
    listed = as_json(run(store, "periodic", "list", "--json"))
    assert [s["name"] for s in listed] == ["ping", "refresh"]
    refresh = listed[1]
    assert (refresh["task"], refresh["queue"], refresh["args"]) == (
        "fetch",
        "fetch",
        ["https://example.com/"],
    )
    assert run(store, "periodic", "pause", "ping").output == "schedule ping paused\n"
    assert as_json(run(store, "periodic", "list", "--json"))[0]["paused"] is True
    assert "active, no overlap, skip missed" not in run(store, "periodic", "list").output
    assert run(store, "periodic", "resume", "ping").output == "schedule ping resumed\n"
    assert "active, no overlap, skip missed" in run(store, "periodic", "list").output
    assert run(store, "periodic", "fires", "ping").output == "schedule ping has not fired yet\n"
    assert run(store, "periodic", "remove", "ping").exit_code == 0
    gone = run(store, "periodic", "pause", "ping")
    assert gone.exit_code == 1
    assert "no periodic schedule named 'ping'; stored: refresh" in gone.output


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--cron", "0 99 * * *"], "is not a cron expression (Bad hour)"),
        ([], "give a cron expression or an interval"),
        (["--every", "5", "--cron", "* * * * *"], "exactly one"),
        (["--every", "soon"], "is not a duration"),
        (["--every", "5", "--tz", "Moon/Base"], "not a known time zone"),
        (["--every", "5", "--args", "[1"], "--args must be a JSON array"),
    ],
)
def test_bad_schedules_are_one_clear_line(store: str, args: list[str], fragment: str) -> None:
    result = run(store, "periodic", "add", "bad", "t", *args)
    assert result.exit_code != 0
    assert fragment in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and fragment in errors[0]


def test_with_an_app_the_task_options_apply(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "periodictasks.py").write_text(textwrap.dedent(TASKS))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    try:
        added = as_json(
            run(
                store,
                "periodic",
                "add",
                "nightly",
                "fetch",
                "--app",
                "periodictasks:app",
                "--cron",
                "0 3 * * *",
                "--args",
                '["https://example.com/"]',
                "--json",
            )
        )
        assert (added["queue"], added["priority"]) == ("pages", 3)
        unknown = run(
            store, "periodic", "add", "x", "nope", "--app", "periodictasks:app", "--every", "60"
        )
        assert unknown.exit_code == 1 and "no task named 'nope'" in unknown.output
    finally:
        sys.modules.pop("periodictasks", None)


def test_stats_counts_the_schedules_and_names_the_next_fire(store: str) -> None:
    run(store, "schedule", "fetch", "--args", "[1]")
    assert "periodic" not in run(store, "stats").stdout
    run(store, "periodic", "add", "hourly", "fetch", "--every", "1h")
    run(store, "periodic", "add", "nightly", "fetch", "--cron", "0 3 * * *")
    run(store, "periodic", "pause", "nightly")
    hourly = as_json(run(store, "periodic", "list", "--json"))
    out = run(store, "stats").stdout
    line = next(line for line in out.splitlines() if line.startswith("periodic schedules"))
    assert line.startswith("periodic schedules: 2 (1 paused); next fire ")
    assert f"`crawlq periodic list --store {store}` lists them" in line
    assert isinstance(hourly, list) and len(hourly) == 2
    assert "periodic" not in run(store, "stats", "--json").stdout  # JSON keeps its shape
