"""The ``crawlq`` command: CliRunner for most commands on a temporary SQLite file, and real
processes for the worker (``python -m crawlq worker --app module:app``)."""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from crawlq.app import App
from crawlq.cli import cli
from crawlq.cli.output import first_line, human_age
from crawlq.crawls import CrawlInfo
from crawlq.jobs import WorkerInfo
from crawlq.stores import open_store
from tests import servers
from tests.integration.conftest import wait_until

TASKS = """
    import time
    from pathlib import Path

    import crawlq

    app = crawlq.App("sqlite:///not-this-one.db")

    @app.task(name="double")
    def double(ctx, n):
        return n * 2

    @app.task(name="fetch", queue="pages", max_attempts=5, priority=3)
    def fetch(ctx, url, depth=0):
        return {"url": url, "depth": depth}

    @app.task(name="boom", max_attempts=1)
    def boom(ctx):
        raise ValueError("it [red]broke[/red]\\nfor good")

    @app.task(name="slow")
    def slow(ctx, seconds):
        Path("started").write_text(str(ctx.job_id))
        time.sleep(seconds)
        return "slept"

    not_an_app = 42
"""


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'jobs.db'}"


@pytest.fixture
def tasks_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A tasks module in tmp_path (the current directory), importable as ``<name>:app``."""
    name = f"clitasks_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(TASKS))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield name
    sys.modules.pop(name, None)


Invoke = Callable[..., Result]


@pytest.fixture
def crawlq(store_url: str) -> Invoke:
    """Run ``crawlq --store <tmp store> ARGS`` in-process."""

    def invoke(*args: str, input: str | None = None, store: bool = True) -> Result:
        argv = ["--store", store_url, *args] if store else list(args)
        return CliRunner().invoke(cli, argv, input=input, catch_exceptions=False)

    return invoke


def as_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def assert_nothing_stored(crawlq: Invoke, store_url: str, listing: str = "stats") -> None:
    """A refused command left nothing: no store file at all, or one whose ``listing``
    (``stats``, ``workers``, ``crawls``) is empty."""
    if Path(store_url.removeprefix("sqlite:///")).exists():
        assert as_json(crawlq(listing, "--json")) == []


def assert_clean_error(result: Result, code: int, *fragments: str) -> None:
    """Failed with ``code``, a one-line-ish message on stderr and no traceback."""
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    assert result.stdout == ""
    for fragment in fragments:
        assert fragment in result.stderr


def stats_of(crawlq: Invoke, queue: str) -> dict[str, Any]:
    rows = as_json(crawlq("stats", "--json"))
    found: dict[str, Any] = next(row for row in rows if row["queue"] == queue)
    return found


# -- help ------------------------------------------------------------------------------


def test_help_names_every_command_and_the_env_vars(crawlq: Invoke) -> None:
    result = crawlq("--help", store=False)
    assert result.exit_code == 0
    for word in (
        *("worker", "workers", "schedule", "stats", "jobs", "job", "dlq", "cancel", "prune"),
        "reschedule",
        *("crawls", "crawl-status", "crawl-pause", "crawl-resume", "crawl-cancel", "limit"),
        "crawl-delete",
    ):
        assert f"  {word} " in result.stdout
    assert "CRAWLQ_STORE" in result.stdout and "CRAWLQ_APP" in result.stdout


@pytest.mark.parametrize(
    ("command", "fragments"),
    [
        (["worker"], ["--concurrency", "[default: 8]", "--burst", "[default: 30]"]),
        (["schedule"], ["--args", "JSON_ARRAY", "--delay", "--at", "--key"]),
        (["stats"], ["--json"]),
        (["workers"], ["--json"]),
        (["jobs"], ["--state", "[default: 50;", "--after-id"]),
        (["job"], ["--json"]),
        (["cancel"], ["ID..."]),
        (["reschedule"], ["ID...", "--delay", "--at"]),
        (["prune"], ["--older-than"]),
        (["dlq", "list"], ["--limit"]),
        (["dlq", "requeue"], ["--id", "--queue", "--all"]),
        (["dlq", "purge"], ["--yes"]),
        (["crawls"], ["--state", "[default: 100;", "--json"]),
        (["crawl-status"], ["ID", "--json"]),
        (["crawl-pause"], ["ID"]),
        (["crawl-resume"], ["ID"]),
        (["crawl-cancel"], ["ID"]),
        (["crawl-delete"], ["ID", "--force"]),
        (["limit", "set"], ["KEY...", "--max-running", "--min-interval"]),
        (["limit", "default"], ["QUEUE", "--remove"]),
        (["limit", "block"], ["--for"]),
        (["limit", "show"], ["--after", "--json"]),
    ],
)
def test_each_command_help_shows_options_defaults_and_env(
    crawlq: Invoke, command: list[str], fragments: list[str]
) -> None:
    result = crawlq(*command, "--help", store=False)
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())  # undo the wrapping
    for fragment in [*fragments, "--store", "CRAWLQ_STORE", "--app", "CRAWLQ_APP", "Example"]:
        assert fragment in text, fragment


# -- schedule, jobs, job, stats without an app ------------------------------------------


def test_schedule_without_app_lists_and_counts_the_job(crawlq: Invoke) -> None:
    out = as_json(crawlq("schedule", "fetch", "--args", '["https://example.com", 2]', "--json"))
    assert out["outcome"] == "created" and out["queue"] == "fetch" and out["task"] == "fetch"

    listed = as_json(crawlq("jobs", "--json"))
    assert [(j["id"], j["queue"], j["args"], j["state"]) for j in listed] == [
        (out["job_id"], "fetch", ["https://example.com", 2], "pending")
    ]
    assert listed[0]["run_at"].endswith("+00:00")
    row = stats_of(crawlq, "fetch")
    assert (row["due"], row["scheduled"], row["done"]) == (1, 0, 0)
    assert row["oldest_due_age"] >= 0


def test_schedule_with_a_key_reports_what_happened(crawlq: Invoke) -> None:
    first = crawlq("schedule", "fetch", "--key", "example.com", "--queue", "pages")
    again = crawlq("schedule", "fetch", "--key", "example.com", "--queue", "pages", "--delay", "1h")
    assert first.exit_code == again.exit_code == 0
    assert first.stdout.strip() == "job 1 created (queue pages)"
    assert again.stdout.strip() == "job 1 updated (queue pages)"
    row = stats_of(crawlq, "pages")
    assert (row["due"], row["scheduled"]) == (0, 1)


def test_schedule_at_a_time_and_with_kwargs(crawlq: Invoke) -> None:
    out = as_json(
        crawlq(
            "schedule", "fetch", "--kwargs", '{"depth": 2}', "--at", "2030-01-31T09:30:00+00:00",
            "--priority", "7", "--json",
        )
    )  # fmt: skip
    job = as_json(crawlq("job", str(out["job_id"]), "--json"))
    assert job["kwargs"] == {"depth": 2} and job["priority"] == 7
    assert job["run_at"] == "2030-01-31T09:30:00.000+00:00"


def test_jobs_filters_and_pages(crawlq: Invoke) -> None:
    for task in ("a", "b", "a", "a"):
        assert crawlq("schedule", task).exit_code == 0
    assert [j["id"] for j in as_json(crawlq("jobs", "--task", "a", "--json"))] == [1, 3, 4]
    assert [j["id"] for j in as_json(crawlq("jobs", "--queue", "b", "--json"))] == [2]
    assert as_json(crawlq("jobs", "--state", "done", "--json")) == []
    page = crawlq("jobs", "--limit", "2")
    assert page.exit_code == 0 and "--after-id 2" in page.stderr
    assert [j["id"] for j in as_json(crawlq("jobs", "--after-id", "2", "--json"))] == [3, 4]


def test_tables_for_people(crawlq: Invoke, store_url: str) -> None:
    open_store(store_url).close()  # an empty store
    assert "no queues yet" in crawlq("stats").stderr
    crawlq("schedule", "fetch", "--args", '["https://example.com/[x]"]')
    crawlq("schedule", "later", "--delay", "2h")
    table = crawlq("stats").stdout
    assert "OLDEST DUE" in table and "fetch" in table and "later" in table
    later_row = next(line for line in table.splitlines() if line.startswith("later"))
    assert later_row.split()[1:4] == ["0", "1", "0"] and " - " in later_row
    listing = crawlq("jobs").stdout
    assert "fetch" in listing and "pending" in listing and "0/3" in listing
    detail = crawlq("job", "1").stdout
    assert '["https://example.com/[x]"]' in detail  # shown as is, not as rich markup


def test_workers_lists_registered_workers(crawlq: Invoke, store_url: str) -> None:
    open_store(store_url).close()  # an empty store
    assert "no workers yet" in crawlq("workers").stderr
    assert as_json(crawlq("workers", "--json")) == []
    store = open_store(store_url)
    try:
        now = store.now()
        for worker_id, started in (
            ("w-old", now - 7200),
            ("w-new", now - 90),
            ("w-crashed", now - 540),
        ):
            store.worker_register(
                WorkerInfo(
                    id=worker_id,
                    host="box-1",
                    pid=4242,
                    queues=("pages", "fetch"),
                    runtime="asyncio",
                    concurrency=64,
                ),
                now=started,
            )
        assert store.worker_heartbeat(
            "w-new", running=5, done=1200, failed=7, rss_bytes=300 * 2**20, now=now - 2
        )
        assert store.worker_reap(dead_after=600, now=now) == ["w-old"]
    finally:
        store.close()

    table = crawlq("workers").stdout
    for header in ("ID", "HOST", "PID", "STATE", "RUNTIME", "SLOTS", "MEMORY", "HEARTBEAT"):
        assert header in table
    lines = table.splitlines()
    new_row = next(line for line in lines if line.startswith("w-new"))
    old_row = next(line for line in lines if line.startswith("w-old"))
    crashed_row = next(line for line in lines if line.startswith("w-crashed"))
    assert lines.index(new_row) < lines.index(crashed_row) < lines.index(old_row)  # alive first
    # No worker ran to reap it, but its heartbeat is 9 minutes old: not shown alive.
    assert crashed_row.split()[3] == "lost" and "9.0 min ago" in crashed_row
    assert new_row.split()[:9] == [
        "w-new", "box-1", "4242", "alive", "asyncio", "64", "5", "1200", "7"
    ]  # fmt: skip
    assert "300.0 MiB" in new_row and "1.5 min ago" in new_row
    assert "dead" in old_row and "2.0 h ago" in old_row and " - " in old_row

    rows = as_json(crawlq("workers", "--json"))
    assert [r["id"] for r in rows] == ["w-new", "w-crashed", "w-old"]
    new, crashed, old = rows
    assert new["state"] == "alive" and old["state"] == "dead" and crashed["state"] == "lost"
    assert crashed["stopped_at"] is None and crashed["last_heartbeat_age"] >= 540
    assert new["queues"] == ["pages", "fetch"] and new["concurrency"] == 64
    assert (new["running"], new["done"], new["failed"]) == (5, 1200, 7)
    assert new["rss_bytes"] == 300 * 2**20 and old["rss_bytes"] is None
    assert new["stopped_at"] is None and old["stopped_at"] is not None
    assert 1.5 <= new["last_heartbeat_age"] < 60
    assert new["started_at"].endswith("+00:00")


def test_missing_job_is_a_clean_error(crawlq: Invoke, store_url: str) -> None:
    open_store(store_url).close()  # an empty store
    assert_clean_error(crawlq("job", "999"), 1, "no job with id 999")


# -- argument errors ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "why"),
    [("not json", "is not valid JSON"), ('{"url": 1}', "is an object"), ('"x"', "a string")],
)
def test_bad_args_json_says_what_is_expected(
    crawlq: Invoke, tmp_path: Path, raw: str, why: str
) -> None:
    result = crawlq("schedule", "fetch", "--args", raw)
    assert_clean_error(
        result, 2, "--args must be a JSON array, e.g. '[\"https://example.com\", 2]'", why
    )
    assert not (tmp_path / "jobs.db").exists()  # refused before the store was opened


def test_bad_kwargs_json(crawlq: Invoke) -> None:
    assert_clean_error(
        crawlq("schedule", "fetch", "--kwargs", "[1]"), 2, "--kwargs must be a JSON object"
    )


def test_non_json_values_in_args_are_refused(crawlq: Invoke) -> None:
    # Python's json module reads NaN; crawlq's payload check refuses it.
    result = crawlq("schedule", "fetch", "--args", "[1, NaN]")
    assert_clean_error(result, 1, "task 'fetch'", "NaN")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--delay", "soon"], "is not a duration"),
        (["--at", "tomorrow"], "is not an ISO 8601 date and time"),
        (["--delay", "5", "--at", "2030-01-01T00:00:00"], "give --delay or --at, not both"),
    ],
)
def test_bad_times(crawlq: Invoke, args: list[str], fragment: str) -> None:
    assert_clean_error(crawlq("schedule", "fetch", *args), 2, fragment)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--priority", "99999999999999999999"], "not in the range -9007199254740991<=x<="),
        (["--priority", "-9007199254740992"], "not in the range -9007199254740991<=x<="),
        (
            ["--at", "0001-01-01T00:00:00"],
            "--at must be a datetime (or seconds since the epoch) from 1970-01-01 to "
            "9999-12-31 UTC, not 0001-01-01T00:00:00",
        ),
        (["--delay", "-5"], "is not a duration"),
        (["--delay", "99999999999d"], "at most 3155760000 (100 years)"),
    ],
)
@pytest.mark.parametrize("with_app", [False, True])
def test_numbers_out_of_range_are_refused_in_one_line(
    crawlq: Invoke,
    store_url: str,
    tasks_module: str,
    args: list[str],
    fragment: str,
    with_app: bool,
) -> None:
    app = ["--app", f"{tasks_module}:app", "--args", '["https://x.test/"]'] if with_app else []
    assert_clean_error(crawlq("schedule", "fetch", *app, *args), 2, fragment)
    assert_nothing_stored(crawlq, store_url)


@pytest.mark.parametrize("depth", [101, 5_000])
def test_arguments_nested_too_deep_are_one_line(crawlq: Invoke, store_url: str, depth: int) -> None:
    result = crawlq("schedule", "fetch", "--args", "[" + "[" * depth + "]" * depth + "]")
    assert_clean_error(result, 2, "more than 100 deep")  # a usage error of --args
    assert_nothing_stored(crawlq, store_url)


def test_the_extreme_priorities_are_scheduled(crawlq: Invoke) -> None:
    for priority in ("9007199254740991", "-9007199254740991"):
        assert crawlq("schedule", "fetch", "--priority", priority).exit_code == 0
    rows = as_json(crawlq("jobs", "--json"))
    assert sorted(r["priority"] for r in rows) == [-(2**53 - 1), 2**53 - 1]


def test_too_many_slots_are_refused_before_the_worker_registers(
    crawlq: Invoke, store_url: str, tasks_module: str
) -> None:
    app = ["--app", f"{tasks_module}:app"]
    result = crawlq("worker", *app, "--concurrency", "100000")
    assert_clean_error(
        result, 1, "concurrency must be a whole number from 1 to 1024 for the thread runtime"
    )
    assert len(result.stderr.strip().splitlines()) == 1
    result = crawlq("worker", *app, "--runtime", "asyncio", "--concurrency", "10001")
    assert_clean_error(result, 1, "from 1 to 10000 for the asyncio runtime")
    assert_nothing_stored(crawlq, store_url, "workers")


@pytest.mark.parametrize("value", ["100000000000000000000", "1e20", "0"])
def test_a_crawl_setting_out_of_range_creates_no_crawl(
    crawlq: Invoke, store_url: str, value: str
) -> None:
    result = crawlq("crawl", "http://127.0.0.1:9/", "--host-concurrency", value)
    assert_clean_error(result, 2, "Invalid value for '--host-concurrency'")
    assert_nothing_stored(crawlq, store_url, "crawls")


def test_bad_store_url_is_one_line(crawlq: Invoke) -> None:
    result = crawlq("--store", "nosuch://x", "stats", store=False)
    assert_clean_error(result, 1, "no store for scheme 'nosuch'")
    assert len(result.stderr.strip().splitlines()) == 1


# -- --app ---------------------------------------------------------------------------------


def test_unknown_app_module(
    crawlq: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    result = crawlq("worker", "--app", "no_such_module_xyz:app", "--burst")
    assert_clean_error(result, 2, "no module named 'no_such_module_xyz'")


@pytest.mark.parametrize(
    ("attr", "fragment"),
    [("nope", "has no attribute 'nope'; Apps in it: app"), ("not_an_app", "not a crawlq.App")],
)
def test_app_attribute_errors(crawlq: Invoke, tasks_module: str, attr: str, fragment: str) -> None:
    assert_clean_error(crawlq("stats", "--app", f"{tasks_module}:{attr}"), 2, fragment)


def test_app_module_that_fails_to_import(
    crawlq: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_tasks_mod.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    result = crawlq("--app", "broken_tasks_mod:app", "stats", store=False)
    sys.modules.pop("broken_tasks_mod", None)
    assert_clean_error(result, 1, "importing 'broken_tasks_mod' failed", "no_such_dependency_xyz")


def test_worker_without_an_app_runs_the_crawler_pages(crawlq: Invoke) -> None:
    result = crawlq("worker", "--burst")
    assert result.exit_code == 0, result.output
    assert "stopped: claimed 0, done 0" in result.output


def test_worker_settings_are_checked(crawlq: Invoke, tasks_module: str) -> None:
    result = crawlq("worker", "--app", f"{tasks_module}:app", "--concurrency", "0")
    assert_clean_error(result, 1, "concurrency must be a whole number from 1 to 1024")
    result = crawlq("worker", "--app", f"{tasks_module}:app", "--max-jobs-per-child", "5")
    assert_clean_error(result, 1, "needs the process runtime", "--runtime process")
    result = crawlq(
        "worker", "--app", f"{tasks_module}:app", "--runtime", "process",
        "--max-memory-per-child", "lots",
    )  # fmt: skip
    assert_clean_error(result, 2, "'lots' is not a size", "500MB")


@pytest.mark.parametrize(
    ("text", "size"),
    [("500MB", 500_000_000), ("800MiB", 800 * 2**20), ("1.5GiB", int(1.5 * 2**30)), ("4096", 4096)],
)
def test_sizes(text: str, size: int) -> None:
    from crawlq.cli.params import size as parse_size

    assert parse_size(None, None, text) == size  # type: ignore[arg-type]


def test_schedule_with_app_uses_the_task_options(crawlq: Invoke, tasks_module: str) -> None:
    app = f"{tasks_module}:app"
    out = as_json(
        crawlq("schedule", "fetch", "--app", app, "--args", '["https://example.com"]', "--json")
    )
    assert out["queue"] == "pages"
    job = as_json(crawlq("job", str(out["job_id"]), "--json"))
    assert (job["max_attempts"], job["priority"], job["args"]) == (5, 3, ["https://example.com"])

    assert_clean_error(crawlq("schedule", "nosuch", "--app", app), 1, "no task named 'nosuch'")
    moved = crawlq("schedule", "double", "--app", app, "--args", "[1]", "--queue", "other")
    assert moved.exit_code == 0 and "(queue other)" in moved.stdout


def test_worker_burst_in_process(crawlq: Invoke, tasks_module: str) -> None:
    for n in (1, 2, 3):
        crawlq("schedule", "double", "--args", f"[{n}]")
    result = crawlq("worker", "--app", tasks_module, "--burst", "--concurrency", "2")
    assert result.exit_code == 0, result.output
    assert "claimed 3, done 3, failed 0, released 0" in result.stdout
    assert "taking jobs from" in result.stderr  # logging went to stderr
    assert stats_of(crawlq, "double")["done"] == 3
    assert [j["result"] for j in as_json(crawlq("jobs", "--json"))] == [2, 4, 6]
    # it stopped before its first heartbeat: its record has the final counters anyway
    [worker] = as_json(crawlq("workers", "--json"))
    assert (worker["state"], worker["running"], worker["done"], worker["failed"]) == (
        "stopped",
        0,
        3,
        0,
    )
    assert worker["stopped_at"] is not None
    [row] = [line for line in crawlq("workers").stdout.splitlines() if "stopped" in line]
    assert row.split()[6:9] == ["0", "3", "0"]  # RUNNING, DONE, FAILED


# -- the dead-letter queue, cancel, prune ------------------------------------------------


def test_dead_letter_queue(crawlq: Invoke, tasks_module: str) -> None:
    app = f"{tasks_module}:app"
    crawlq("schedule", "boom", "--app", app)  # max_attempts=1, from the task
    crawlq("schedule", "double", "--args", "[1]")
    assert crawlq("worker", "--app", app, "--burst").exit_code == 0

    dead = as_json(crawlq("dlq", "list", "--json"))
    assert [(j["id"], j["dead_reason"]) for j in dead] == [(1, "max_attempts")]
    assert "ValueError: it [red]broke[/red]" in dead[0]["last_error"]
    table = crawlq("dlq", "list").stdout
    assert "max_attempts" in table and "for good" in table  # the error's last line

    assert_clean_error(
        crawlq("dlq", "requeue"), 2, "give --id ID (repeatable), --queue QUEUE or --all"
    )
    assert_clean_error(crawlq("dlq", "purge", "--all", "--queue", "boom"), 2, "give it alone")
    requeued = crawlq("dlq", "requeue", "--id", "1", "--id", "2")
    assert requeued.stdout.splitlines() == [
        "requeued 1 dead job",
        "not requeued (not dead, no such job, or its key is live again): 2",
    ]
    assert stats_of(crawlq, "boom")["due"] == 1
    assert crawlq("worker", "--app", app, "--burst").exit_code == 0
    assert crawlq("dlq", "requeue", "--queue", "double").stdout.startswith("requeued 0 dead jobs")

    refused = crawlq("dlq", "purge", "--queue", "boom", input="n\n")
    assert refused.exit_code == 1 and "Delete 1 dead job for good?" in refused.stderr
    assert len(as_json(crawlq("dlq", "list", "--json"))) == 1
    assert crawlq("dlq", "purge", "--all", "--yes").stdout.strip() == "purged 1 dead job"
    assert as_json(crawlq("dlq", "list", "--json")) == []


def test_cancel_says_which_were_cancelled(crawlq: Invoke) -> None:
    crawlq("schedule", "fetch")
    crawlq("schedule", "fetch")
    result = crawlq("cancel", "2", "999")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "cancelled 1: 2",
        "not cancellable (finished, or no such job) 1: 999",
    ]
    assert [j["state"] for j in as_json(crawlq("jobs", "--json"))] == ["pending", "cancelled"]
    assert_clean_error(crawlq("cancel"), 2, "Missing argument")


def test_reschedule_moves_pending_jobs_only(crawlq: Invoke) -> None:
    crawlq("schedule", "fetch", "--delay", "1h")
    crawlq("schedule", "fetch")
    crawlq("cancel", "2")
    result = crawlq("reschedule", "1", "2", "999")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "rescheduled 1: 1",
        "not pending (running, finished, or no such job) 2: 2, 999",
    ]
    assert stats_of(crawlq, "fetch")["due"] == 1
    crawlq("reschedule", "1", "--at", "2030-01-31T09:30:00+00:00")
    assert as_json(crawlq("job", "1", "--json"))["run_at"] == "2030-01-31T09:30:00.000+00:00"
    crawlq("reschedule", "1", "--delay", "2h")
    assert stats_of(crawlq, "fetch")["scheduled"] == 1
    assert_clean_error(
        crawlq("reschedule", "1", "--delay", "1", "--at", "2030-01-01"), 2, "not both"
    )
    assert_clean_error(crawlq("reschedule"), 2, "Missing argument")


def test_prune_deletes_finished_jobs_past_the_retention(crawlq: Invoke) -> None:
    crawlq("schedule", "fetch")
    crawlq("schedule", "fetch")
    crawlq("cancel", "1")
    assert crawlq("prune", "--older-than", "1h").stdout.startswith("pruned 0 ")
    assert crawlq("prune", "--older-than", "0").stdout.startswith("pruned 1 ")
    assert [j["id"] for j in as_json(crawlq("jobs", "--json"))] == [2]
    assert_clean_error(crawlq("prune"), 2, "--older-than")


# -- where the store comes from ------------------------------------------------------------


def test_env_var_and_option_precedence(
    crawlq: Invoke, store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = f"sqlite:///{tmp_path / 'other.db'}"
    monkeypatch.setenv("CRAWLQ_STORE", store_url)
    assert crawlq("schedule", "from-env", store=False).exit_code == 0
    # a --store on the group beats the env var; one on the command beats the group's
    assert crawlq("--store", other, "schedule", "from-group", store=False).exit_code == 0
    result = crawlq("--store", other, "schedule", "from-command", "--store", store_url, store=False)
    assert result.exit_code == 0

    def queues(url: str) -> list[str]:
        return [r["queue"] for r in as_json(crawlq("stats", "--json", "--store", url, store=False))]

    assert queues(store_url) == ["from-command", "from-env"]
    assert queues(other) == ["from-group"]


def test_app_from_env_and_its_store_is_replaced_by_store(
    crawlq: Invoke, tasks_module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRAWLQ_APP", f"{tasks_module}:app")
    out = as_json(crawlq("schedule", "fetch", "--args", '["u"]', "--json"))
    assert out["queue"] == "pages"  # the app's task options applied
    assert not (tmp_path / "not-this-one.db").exists()


# -- helpers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (0.04, "0.0 s"),
        (3.21, "3.2 s"),
        (90, "1.5 min"),
        (7200, "2.0 h"),
        (3 * 86400, "3.0 d"),
    ],
)
def test_human_age(seconds: float | None, text: str) -> None:
    assert human_age(seconds) == text


def test_first_line_of_an_error_is_its_last_line() -> None:
    assert (
        first_line("Traceback (most recent call last):\n  ...\nValueError: x\n\n")
        == "ValueError: x"
    )
    assert first_line(None) is None


# -- real processes ------------------------------------------------------------------------


def run_crawlq(
    cwd: Path, store_url: str, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crawlq", *args],
        cwd=cwd,
        env=process_env(store_url),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def process_env(store_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLQ_")}
    env.pop("PYTHONPATH", None)  # the tasks module must be found in the current directory
    env["CRAWLQ_STORE"] = store_url
    return env


def test_worker_process_in_burst_mode(tmp_path: Path, store_url: str, crawlq: Invoke) -> None:
    (tmp_path / "sitejobs.py").write_text(textwrap.dedent(TASKS))
    for n in range(5):
        assert crawlq("schedule", "double", "--args", f"[{n}]").exit_code == 0

    worker = run_crawlq(tmp_path, store_url, "worker", "--app", "sitejobs:app", "--burst")
    assert worker.returncode == 0, worker.stderr
    assert "claimed 5, done 5, failed 0, released 0" in worker.stdout
    assert "INFO crawlq.worker" in worker.stderr

    stats = run_crawlq(tmp_path, store_url, "stats", "--json")
    assert stats.returncode == 0, stats.stderr
    [row] = json.loads(stats.stdout)
    assert (row["queue"], row["done"], row["due"], row["running"]) == ("double", 5, 0, 0)


def test_worker_process_stops_gracefully_on_sigterm(
    tmp_path: Path, store_url: str, crawlq: Invoke
) -> None:
    (tmp_path / "slowjobs.py").write_text(textwrap.dedent(TASKS))
    crawlq("schedule", "slow", "--args", "[0.5]")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "crawlq",
            "worker",
            "--app",
            "slowjobs:app",
            "--log-level",
            "warning",
        ],
        cwd=tmp_path,
        env=process_env(store_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(
            lambda: (tmp_path / "started").exists() or proc.poll() is not None, 30, "the job"
        )
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, stderr
    assert "received SIGTERM" in stderr
    assert "claimed 1, done 1, failed 0, released 0" in stdout
    assert as_json(crawlq("job", "1", "--json"))["result"] == "slept"
    [worker] = as_json(crawlq("workers", "--json"))
    assert (worker["state"], worker["done"], worker["pid"]) == ("stopped", 1, proc.pid)


# -- crawls and limits ----------------------------------------------------------------


def make_crawl(url: str, jobs: int = 3) -> CrawlInfo:
    app = App(url)
    page = app.task(name="page")(lambda ctx, n: None)
    info = app.crawl("shop.test", [page.spec(i) for i in range(jobs)], meta={"team": "a"})
    app.close()
    return info


def test_crawls_lists_and_crawl_status_shows_one(crawlq: Invoke, store_url: str) -> None:
    info = make_crawl(store_url)
    rows = as_json(crawlq("crawls", "--json"))
    assert [(r["id"], r["name"], r["state"], r["pending"], r["meta"]) for r in rows] == [
        (info.id, "shop.test", "running", 3, {"team": "a"})
    ]
    table = crawlq("crawls")
    assert table.exit_code == 0 and "shop.test" in table.stdout and "0/3 (0%)" in table.stdout
    one = as_json(crawlq("crawl-status", str(info.id), "--json"))
    assert one["id"] == info.id and one["finished_at"] is None
    assert "progress" in crawlq("crawl-status", str(info.id)).stdout
    assert as_json(crawlq("crawls", "--state", "finished", "--json")) == []


def test_pause_resume_cancel_and_their_errors(crawlq: Invoke, store_url: str) -> None:
    info = make_crawl(store_url)
    out = crawlq("crawl-pause", str(info.id))
    assert out.exit_code == 0 and out.stdout == f"crawl {info.id} (shop.test) is paused\n"
    held = next(r for r in as_json(crawlq("stats", "--json")) if r["queue"] == "page")
    assert held["held"] == 3 and held["due"] == 0
    assert "is running" in crawlq("crawl-resume", str(info.id)).stdout
    assert "is cancelled" in crawlq("crawl-cancel", str(info.id)).stdout
    assert as_json(crawlq("crawl-status", str(info.id), "--json"))["cancelled"] == 3
    assert_clean_error(crawlq("crawl-pause", str(info.id)), 1, "cannot be paused")
    assert_clean_error(crawlq("crawl-status", "77"), 1, "no crawl has id 77")


def test_schedule_into_a_crawl_with_a_limit_key(crawlq: Invoke, store_url: str) -> None:
    info = make_crawl(store_url)
    out = as_json(
        crawlq(
            "schedule", "page", "--args", "[9]", "--crawl", str(info.id),
            "--limit-key", "shop.test", "--json",
        )
    )  # fmt: skip
    assert out["outcome"] == "created"
    assert as_json(crawlq("crawl-status", str(info.id), "--json"))["pending"] == 4
    result = crawlq("schedule", "page", "--crawl", "55")
    assert_clean_error(result, 1, "no crawl has id 55: `crawlq crawls` lists them")
    assert "crawl_create" not in result.stderr


def test_limit_set_block_show(crawlq: Invoke) -> None:
    out = crawlq("limit", "set", "a.test", "b.test", "--max-running", "2", "--min-interval", "1.5")
    assert out.exit_code == 0, out.output
    assert crawlq("limit", "block", "a.test", "--for", "10m").exit_code == 0
    rows = as_json(crawlq("limit", "show", "--json"))
    assert [(r["key"], r["max_running"], r["min_interval"], r["override"]) for r in rows] == [
        ("a.test", 2, 1.5, True),
        ("b.test", 2, 1.5, True),
    ]
    assert rows[0]["blocked_until"] is not None and rows[1]["blocked_until"] is None
    table = crawlq("limit", "show", "a.test")
    assert "override" in table.stdout and "in 10.0 min" in table.stdout
    assert_clean_error(crawlq("limit", "show", "nope.test"), 1, "no record of key 'nope.test'")
    assert crawlq("limit", "set", "a.test", "--max-running", "0").exit_code == 2
    assert crawlq("limit", "block", "a.test", "--for", "soon").exit_code == 2
    assert crawlq("limit", "default", "page", "--max-running", "1").exit_code == 0
    assert crawlq("limit", "default", "page", "--remove").exit_code == 0


# -- opening stores ------------------------------------------------------------------------

LOOKING = [
    ["stats"],
    ["jobs"],
    ["job", "1"],
    ["workers"],
    ["crawls"],
    ["crawl-status", "1"],
    ["crawl-export", "1"],
    ["limit", "show"],
    ["dlq", "list"],
    ["dlq", "purge", "--all", "--yes"],
    ["cancel", "1"],
    ["prune", "--older-than", "1d"],
    ["crawl-pause", "1"],
]


@pytest.mark.parametrize("args", LOOKING, ids=" ".join)
def test_commands_that_look_refuse_a_missing_sqlite_file_and_create_none(
    crawlq: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CRAWLQ_STORE", raising=False)
    monkeypatch.delenv("CRAWLQ_APP", raising=False)
    for result, path in (
        (crawlq(*args, store=False), tmp_path / "crawlq.db"),  # the default store
        (crawlq(*args), tmp_path / "jobs.db"),
    ):
        assert_clean_error(result, 1, f"no store at {path}: the file does not exist", "--store")
        assert len(result.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("", "the store URL is empty"),
        ("sqlite:jobs.db", "lacks the // after sqlite"),
        ("sqlite:/jobs.db", "lacks the // after sqlite"),
        ("sqlite:///", "names no file"),
    ],
)
def test_misspelt_sqlite_urls_are_refused_with_the_right_spellings(
    crawlq: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, fragment: str
) -> None:
    monkeypatch.chdir(tmp_path)
    for args in (["stats"], ["schedule", "t"]):
        result = crawlq(*args, "--store", url, store=False)
        assert_clean_error(
            result, 1, fragment, "sqlite:///relative/path.db", "sqlite:////absolute/path.db"
        )
        assert len(result.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_an_unopenable_sqlite_path_is_named(crawlq: Invoke, tmp_path: Path) -> None:
    (tmp_path / "notes.db").write_text("not a database, " * 100)
    cases = [
        (f"sqlite:///{tmp_path}", f"{tmp_path}: it is a directory"),
        (
            f"sqlite:///{tmp_path / 'missing' / 'jobs.db'}",
            f"its directory {tmp_path / 'missing'} does not exist",
        ),
        (f"sqlite:///{tmp_path / 'notes.db'}", f"{tmp_path / 'notes.db'}: file is not a database"),
    ]
    for url, fragment in cases:
        result = crawlq("schedule", "t", "--store", url, store=False)
        assert_clean_error(result, 1, "cannot open the SQLite store", fragment)
        assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "missing").exists()


# -- printed commands work as printed ------------------------------------------------------


def shell_env(**extra: str) -> dict[str, str]:
    """A clean environment with ``crawlq`` on PATH and no CRAWLQ_ variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLQ_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return {**env, **extra}


def hints(text: str, command: str) -> list[str]:
    """The printed ```crawlq COMMAND ...``` commands in ``text``."""
    return re.findall(rf"`(crawlq {command}[^`]*)`", text)


def run_hint(hint: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a printed command as a user pastes it: through the shell."""
    return subprocess.run(
        ["bash", "-c", hint], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_readme_demo_prints_an_export_command_that_works(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    here = tmp_path / "elsewhere"
    here.mkdir()
    demo = subprocess.run(
        [sys.executable, str(tmp_path / "examples" / "crawl_demo.py")],
        cwd=here,
        env=shell_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert demo.returncode == 0, demo.stderr
    [export] = hints(demo.stderr, "crawl-export")
    again = run_hint(f"{export} -o again.jsonl", here, shell_env())
    assert again.returncode == 0, again.stderr
    pages = (tmp_path / "examples" / "pages.jsonl").read_text()
    assert len(pages.splitlines()) == 8
    assert (here / "again.jsonl").read_text() == pages
    assert sorted(p.name for p in here.iterdir()) == ["again.jsonl"]  # no crawlq.db
    # the demo's own printed command names the store it really used
    [shown] = [line for line in demo.stdout.splitlines() if line.startswith("$ crawlq crawl")]
    assert "--store" in shown and "crawl-demo.db" in shown


@pytest.fixture
def book_site() -> Iterator[str]:
    """examples/site on loopback; yields its URL."""
    handler = functools.partial(QuietHandler, directory=str(EXAMPLES / "site"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def _store_for_hints(kind: str, directory: Path) -> str:
    if kind == "sqlite":  # relative, with a space and an option: quoting matters
        return "sqlite:///my jobs.db?synchronous=full"
    if kind == "redis":
        return f"{servers.redis().url}?prefix={servers.isolated_name(directory, 'h')}"
    pg = servers.postgres()  # trust authentication: the password is not checked
    schema = servers.isolated_name(directory, "h_")
    return f"postgresql://postgres:s3cret@127.0.0.1:{pg.port}/postgres?schema={schema}"


@pytest.mark.parametrize("kind", ["sqlite", "redis", "postgres-with-password"])
def test_hints_after_a_crawl_name_its_store_and_work_as_printed(
    book_site: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CRAWLQ_STORE", raising=False)
    monkeypatch.delenv("CRAWLQ_APP", raising=False)
    url = _store_for_hints(kind, tmp_path)
    env = shell_env(CRAWLQ_STORE=url) if "password" in kind else shell_env()
    crawl = ["crawl", book_site, "--store", url, "--allow-private", "--delay", "0"]
    result = CliRunner().invoke(cli, [*crawl, "-o", "pages.jsonl", "--no-progress"])
    assert result.exit_code == 0, result.output
    [export] = hints(result.stderr, "crawl-export")
    if "password" in kind:
        assert "s3cret" not in result.output
        assert export.endswith('--store "$CRAWLQ_STORE"')
        assert "not printed as it holds a password" in result.stderr
    again = run_hint(f"{export} -o again.jsonl", tmp_path, env)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again.jsonl").read_text() == (tmp_path / "pages.jsonl").read_text()

    # --detach: the worker and crawl-status commands it prints work too
    result = CliRunner().invoke(cli, [*crawl, "--new", "--detach"])
    assert result.exit_code == 0, result.output
    crawl_id = result.stdout.strip()
    [worker] = hints(result.stderr, "worker")
    [status] = hints(result.stderr, f"crawl-status {crawl_id}")
    done = run_hint(f"{worker} --burst", tmp_path, env)
    assert done.returncode == 0, done.stderr
    shown = run_hint(f"{status} --json", tmp_path, env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["state"] == "finished"

    # so does the one after an unknown crawl id
    result = CliRunner().invoke(cli, ["crawl-export", "99", "--store", url])
    assert result.exit_code == 1
    [lister] = hints(result.stderr, "crawls")
    listed = run_hint(f"{lister} --json", tmp_path, env)
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 2
    assert not (tmp_path / "crawlq.db").exists()


def test_the_redis_persistence_warning_shows_once_and_never_to_commands_that_look(
    tmp_path: Path,
) -> None:
    from tests.unit.test_redis_store import throwaway_redis

    with throwaway_redis("--appendonly", "no", "--save", "") as url:
        env = shell_env(CRAWLQ_STORE=url)
        outputs = [
            run_hint(command, tmp_path, env)
            for command in ("crawlq stats", "crawlq schedule t", "crawlq schedule t", "crawlq jobs")
        ]
    assert [p.returncode for p in outputs] == [0, 0, 0, 0], [p.stderr for p in outputs]
    assert ["persists nothing" in p.stderr for p in outputs] == [False, True, False, False]
