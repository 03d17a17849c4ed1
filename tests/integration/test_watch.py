"""``--watch`` on stats, crawls, crawl-status and workers: the view is redrawn with what
changed in the store, until Ctrl-C, which ends it cleanly (exit 0, no traceback)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from crawlq import App
from crawlq.jobs import WorkerInfo


def _setup(app: App) -> int:
    @app.task(name="t", queue="q")
    def t(ctx: object) -> None:
        pass

    t.delay()
    return app.crawl("site", [t.spec()]).id


def _more_jobs(app: App, crawl: int) -> None:
    app.schedule_many(app.tasks["t"].spec() for _ in range(997))  # 2 + 997 due


def _cancel(app: App, crawl: int) -> None:
    app.cancel_crawl(crawl)


def _pause(app: App, crawl: int) -> None:
    app.pause_crawl(crawl)


def _new_worker(app: App, crawl: int) -> None:
    info = WorkerInfo(id="w-new", host="h", pid=7, queues=("q",), runtime="thread", concurrency=3)
    app.store.worker_register(info)


CHANGES: dict[str, tuple[list[str], Callable[[App, int], None], str]] = {
    "stats": (["stats"], _more_jobs, "999"),
    "crawls": (["crawls"], _cancel, "cancelled"),
    "crawl-status": (["crawl-status", "CRAWL"], _pause, "paused"),
    "workers": (["workers"], _new_worker, "w-new"),
}


@pytest.mark.parametrize("command", sorted(CHANGES))
def test_watch_redraws_until_ctrl_c(command: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    app = App(url)
    crawl = _setup(app)
    argv, change, expect = CHANGES[command]
    argv = [a.replace("CRAWL", str(crawl)) for a in argv]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLQ_")}
    argv = [sys.executable, "-m", "crawlq", "--store", url, *argv, "--watch", "0.2"]
    out: list[str] = []
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with subprocess.Popen(argv, text=True, env=env, **pipes) as proc:  # type: ignore[call-overload]
        reader = threading.Thread(target=lambda: out.extend(iter(proc.stdout.readline, "")))
        reader.start()
        try:
            deadline = time.monotonic() + 20
            while "Ctrl-C stops" not in "".join(out):
                assert time.monotonic() < deadline, "no first view"
                time.sleep(0.05)
            assert expect not in "".join(out)
            change(app, crawl)
            while expect not in "".join(out):
                assert time.monotonic() < deadline, f"{expect!r} not shown: {''.join(out)[-500:]}"
                time.sleep(0.05)
            assert "".join(out).count("Ctrl-C stops") >= 2  # redrawn, not run once
        finally:
            proc.send_signal(signal.SIGINT)
            rc = proc.wait(10)
            reader.join(10)
            errors = proc.stderr.read()
            app.close()
    assert rc == 0
    assert "Traceback" not in errors


def test_watch_refuses_json(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from crawlq.cli import cli

    App(f"sqlite:///{tmp_path / 'jobs.db'}").open().close()
    result = CliRunner().invoke(
        cli, ["--store", f"sqlite:///{tmp_path / 'jobs.db'}", "stats", "--json", "--watch"]
    )
    assert result.exit_code == 2 and "without --json" in result.output
