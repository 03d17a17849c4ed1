"""The errors of ``app.wait`` and ``app.result`` (``crawlq.results``): their messages,
attributes and pickling, without a store."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

import crawlq
from crawlq.jobs import Job, JobState, Outcome, ScheduleResult
from crawlq.results import job_id_of, result_of

JOB = Job(
    id=42,
    queue="pages",
    task="fetch",
    args=["https://example.com/"],
    kwargs={},
    key=None,
    priority=0,
    run_at=1.0,
    state=JobState.DEAD,
    attempts=3,
    max_attempts=3,
    lease_seconds=30.0,
    timeout=None,
    worker_id=None,
    lease_token=None,
    lease_expires_at=None,
    last_error='Traceback (most recent call last):\n  File "x.py"\nValueError: no price\n',
    dead_reason="max_attempts",
    result=None,
    created_at=0.0,
    started_at=1.0,
    finished_at=2.0,
)


def test_a_dead_job_raises_job_failed_with_its_reason_and_last_error_line() -> None:
    with pytest.raises(crawlq.JobFailed) as caught:
        result_of(JOB)
    error = caught.value
    assert str(error) == (
        "job 42 (fetch) is dead (max_attempts) after 3 attempt(s): ValueError: no price"
    )
    assert (error.job, error.reason, error.error) == (JOB, "max_attempts", JOB.last_error)
    assert isinstance(error, crawlq.CrawlqError)


def test_a_cancelled_job_raises_job_cancelled_and_a_done_one_gives_its_result() -> None:
    with pytest.raises(crawlq.JobCancelled, match="job 42 \\(fetch\\) was cancelled"):
        result_of(dataclasses.replace(JOB, state=JobState.CANCELLED))
    done = dataclasses.replace(JOB, state=JobState.DONE, result={"price": 3})
    assert result_of(done) == {"price": 3}


def test_wait_timeout_is_a_timeout_error() -> None:
    error = crawlq.WaitTimeout(dataclasses.replace(JOB, state=JobState.RUNNING), 2.5)
    assert isinstance(error, TimeoutError) and isinstance(error, crawlq.CrawlqError)
    assert str(error) == "job 42 (fetch) did not finish within 2.5 s: it is running"


@pytest.mark.parametrize(
    "error",
    [
        crawlq.JobFailed(JOB),
        crawlq.JobCancelled(dataclasses.replace(JOB, state=JobState.CANCELLED)),
        crawlq.WaitTimeout(JOB, 1.0),
    ],
)
def test_the_errors_survive_pickling(error: Exception) -> None:
    """They cross process boundaries (a process pool that waits for jobs)."""
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error)
    assert copy.job == error.job  # type: ignore[attr-defined]


def test_what_to_wait_for() -> None:
    assert job_id_of(7) == 7
    assert job_id_of(ScheduleResult(7, Outcome.UPDATED)) == 7
    with pytest.raises(crawlq.ConfigurationError, match="job id must be a whole number"):
        job_id_of(0)
