"""``crawlq job ID --wait``: a real ``crawlq`` process waits while the job ends through
another connection, on every store (``store_url`` of conftest.py); its exit code says how
the job ended."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from crawlq.jobs import JobSpec
from crawlq.stores import open_store
from crawlq.stores.base import ClaimParams, Completion, Failure, Store


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = open_store(store_url)
    yield opened
    opened.close()


def _start(store_url: str, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLQ_")}
    return subprocess.Popen(
        [sys.executable, "-m", "crawlq", "job", *args, "--store", store_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _waiting(
    store: Store, store_url: str, end: Callable[[Store, int], None]
) -> tuple[int, str, str]:
    """Schedule a job, start ``crawlq job ID --wait --json`` and end the job with ``end``
    once the process has had time to start waiting; its exit code, stdout and stderr."""
    [scheduled] = store.job_schedule([JobSpec(queue="q", task="t", args=[3])])
    proc = _start(store_url, str(scheduled.job_id), "--wait", "--json")
    time.sleep(1.5)  # python starts, imports crawlq and waits
    assert proc.poll() is None, proc.communicate()
    end(store, scheduled.job_id)
    out, err = proc.communicate(timeout=30)
    return proc.returncode, out, err


def _claim(store: Store) -> Completion:
    [job] = store.job_claim(ClaimParams(queues=["q"], worker_id="w"))
    return Completion(lease=job.lease, result={"double": 6})


def test_wait_prints_the_done_job_and_exits_0(store: Store, store_url: str) -> None:
    code, out, err = _waiting(store, store_url, lambda s, _: s.job_complete([_claim(s)]))
    assert code == 0, err
    assert json.loads(out)["result"] == {"double": 6}


def test_wait_for_a_dead_job_shows_it_and_exits_3(store: Store, store_url: str) -> None:
    def kill(s: Store, _: int) -> None:
        lease = _claim(s).lease
        s.job_fail([Failure(lease=lease, error="Traceback ...\nValueError: no", retry_delay=None)])

    code, out, err = _waiting(store, store_url, kill)
    assert code == 3, err
    assert json.loads(out)["state"] == "dead"
    assert err.strip().startswith("Error: job 1 (t) is dead (error) after 1 attempt(s)")
    assert err.strip().endswith("ValueError: no") and err.count("\n") == 1


def test_wait_for_a_cancelled_job_exits_4(store: Store, store_url: str) -> None:
    code, out, err = _waiting(store, store_url, lambda s, job_id: s.job_cancel([job_id]))
    assert code == 4, err
    assert json.loads(out)["state"] == "cancelled"
    assert "Error: job 1 (t) was cancelled" in err


def test_wait_timeout_exits_124_and_bad_use_is_refused(store: Store, store_url: str) -> None:
    [scheduled] = store.job_schedule([JobSpec(queue="q", task="t")])
    proc = _start(store_url, str(scheduled.job_id), "--wait", "--timeout", "0.5")
    out, err = proc.communicate(timeout=30)
    assert (proc.returncode, out) == (124, "")
    assert err == "Error: job 1 (t) did not finish within 0.5 s: it is pending\n"
    proc = _start(store_url, "99", "--wait")
    out, err = proc.communicate(timeout=30)
    assert (proc.returncode, out) == (1, "") and "no job with id 99" in err
    proc = _start(store_url, "1", "--timeout", "5")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "--timeout goes with --wait" in err
