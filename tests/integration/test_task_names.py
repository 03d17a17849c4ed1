"""Task names: the same function gets the same name whether its module runs as a script
(``python keys.py``, ``python -m keys``) or is imported by a worker (``--app keys:app``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.integration.test_cli import process_env, run_crawlq

KEYS = """
    import sys

    import crawlq

    app = crawlq.App("sqlite:///{db}")

    @app.task
    def disc(ctx, n):
        return n + 1

    if __name__ == "__main__":
        print(disc.name)
        disc.schedule(41)
        if sys.argv[1:] == ["run"]:  # a worker in this script, children import it again
            settings = crawlq.WorkerSettings(burst=True, runtime="process", concurrency=1)
            crawlq.Worker(app, settings).run()
"""


def python(cwd: Path, store_url: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=process_env(store_url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize(
    ("script", "run", "app_ref", "name"),
    [
        ("keys.py", ["keys.py"], "keys:app", "keys.disc"),
        ("keys.py", ["-m", "keys"], "keys:app", "keys.disc"),
        ("pkg/keys.py", ["pkg/keys.py"], "pkg.keys:app", "pkg.keys.disc"),
        ("pkg/keys.py", ["-m", "pkg.keys"], "pkg.keys:app", "pkg.keys.disc"),
    ],
)
def test_a_script_and_a_worker_importing_it_agree_on_task_names(
    tmp_path: Path, script: str, run: list[str], app_ref: str, name: str
) -> None:
    db = tmp_path / "jobs.db"
    store_url = f"sqlite:///{db}"
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / script).write_text(textwrap.dedent(KEYS).format(db=db))
    assert python(tmp_path, store_url, *run) == name
    worker = run_crawlq(tmp_path, store_url, "worker", "--app", app_ref, "--burst")
    assert worker.returncode == 0, worker.stderr
    assert "claimed 1, done 1, failed 0" in worker.stdout


def test_a_script_runs_its_own_jobs_in_the_process_runtime(tmp_path: Path) -> None:
    """The children of the process runtime import the script again (as ``__mp_main__``):
    its tasks keep their names there too."""
    db = tmp_path / "jobs.db"
    (tmp_path / "keys.py").write_text(textwrap.dedent(KEYS).format(db=db))
    assert python(tmp_path, f"sqlite:///{db}", "keys.py", "run") == "keys.disc"
    jobs = run_crawlq(tmp_path, f"sqlite:///{db}", "jobs", "--json")
    assert jobs.returncode == 0, jobs.stderr
    assert '"state": "done"' in jobs.stdout and '"result": 42' in jobs.stdout


def test_an_idle_worker_names_the_queues_with_due_jobs_it_does_not_serve(tmp_path: Path) -> None:
    """The first hour's trap: jobs stored under another task name wait in a queue no
    worker serves; the worker says so (once), naming that queue."""
    db = tmp_path / "jobs.db"
    store_url = f"sqlite:///{db}"
    (tmp_path / "keys.py").write_text(textwrap.dedent(KEYS).format(db=db))
    for n in range(3):
        done = run_crawlq(tmp_path, store_url, "schedule", "__main__.disc", "--args", f"[{n}]")
        assert done.returncode == 0, done.stderr
    worker = run_crawlq(tmp_path, store_url, "worker", "--app", "keys:app", "--burst")
    assert worker.returncode == 0, worker.stderr
    assert "claimed 0" in worker.stdout
    [line] = [x for x in worker.stderr.splitlines() if "queues it does not serve" in x]
    assert " WARNING crawlq.worker: " in line
    assert "(crawl, keys.disc)" in line and ": __main__.disc (3 due)." in line
