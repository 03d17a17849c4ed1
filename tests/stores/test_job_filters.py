"""JobFilter's key, crawl and limit_key fields (the web API's job filters): listing,
requeueing and purging select by them alike on every store."""

from __future__ import annotations

import pytest
from store_helpers import T0, add, claim_one, fail, ids, new_crawl, spec

from crawlq.exceptions import ConfigurationError
from crawlq.jobs import JobState
from crawlq.stores.base import Completion, JobFilter, Store
from crawlq.types import JobId


def _mix(store: Store) -> dict[str, JobId]:
    crawl = new_crawl(store, spec(queue="c", limit_key="a.example"), name="one")
    other = new_crawl(store, spec(queue="c", limit_key="b.example"), name="two")
    c1, c2 = (j.id for j in store.job_list(JobFilter(queue="c")))
    return {
        "crawl": crawl.id,
        "other": other.id,
        "c1": c1,
        "c2": c2,
        "k1": add(store, key="k1", limit_key="a.example"),
        "k2": add(store, key="k2"),
        "plain": add(store),
    }


@pytest.mark.parametrize(
    ("field", "names"),
    [
        ("key", ["k1"]),
        ("crawl", ["c1"]),
        ("limit_key", ["c1", "k1"]),
    ],
)
def test_job_list_by_key_crawl_and_limit_key(store: Store, field: str, names: list[str]) -> None:
    j = _mix(store)
    value: object = {"key": "k1", "crawl": j["crawl"], "limit_key": "a.example"}[field]
    found = ids(store.job_list(JobFilter(**{field: value})))  # type: ignore[arg-type]
    assert found == [j[n] for n in names]


def test_filters_combine_and_page(store: Store) -> None:
    j = _mix(store)
    assert ids(store.job_list(JobFilter(limit_key="a.example", queue="q"))) == [j["k1"]]
    assert ids(store.job_list(JobFilter(limit_key="a.example", limit=1))) == [j["c1"]]
    after = JobFilter(limit_key="a.example", after_id=j["c1"], limit=1)
    assert ids(store.job_list(after)) == [j["k1"]]
    assert store.job_list(JobFilter(crawl=j["crawl"] + 100)) == []
    assert store.job_list(JobFilter(key="nope")) == []


def test_requeue_and_purge_by_crawl(store: Store) -> None:
    j = _mix(store)
    assert claim_one(store, ["c"]).id == j["c1"]
    job = store.job_get(j["c1"])
    assert job is not None
    assert fail(store, job.lease, now=T0, error="x")
    assert fail(store, claim_one(store, ["c"]).lease, now=T0, error="y")
    assert store.job_requeue(JobFilter(crawl=j["other"])) == []  # its crawl finished
    assert store.job_purge(JobFilter(crawl=j["other"])) == 1
    assert ids(store.job_list(JobFilter(state=JobState.DEAD))) == [j["c1"]]
    assert store.job_purge(JobFilter(limit_key="a.example")) == 1


@pytest.mark.parametrize(
    "fields",
    [
        {"crawl": 0},
        {"crawl": -3},
        {"crawl": "1"},
        {"key": "a\x00b"},
        {"limit_key": "\ud800"},
        {"queue": "\x00"},
        {"task": "t\x00"},
    ],
)
def test_bad_filter_values_are_refused(fields: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        JobFilter(**fields)  # type: ignore[arg-type]


def test_job_list_of_running_jobs_pages_by_id_and_filters_by_queue(store: Store) -> None:
    """Running jobs listed by state (the worker's look for jobs a lost claim leased, the
    CLI's ``jobs --state running``): every running job and no other, in id order, paged
    with after_id and limit, by queue."""
    for queue in ("a", "b"):
        for _ in range(5):
            add(store, queue=queue)
    running = [claim_one(store, (queue,), worker=f"w-{queue}").id for queue in "abab"]
    add(store, queue="a")  # pending, not listed
    listed = store.job_list(JobFilter(state=JobState.RUNNING))
    assert [j.id for j in listed] == sorted(running)
    assert all(j.state is JobState.RUNNING and j.lease_token for j in listed)
    first = store.job_list(JobFilter(state=JobState.RUNNING, limit=3))
    rest = store.job_list(JobFilter(state=JobState.RUNNING, after_id=first[-1].id))
    assert [j.id for j in first + rest] == sorted(running)
    only_b = store.job_list(JobFilter(state=JobState.RUNNING, queue="b"))
    assert {j.worker_id for j in only_b} == {"w-b"} and len(only_b) == 2
    store.job_complete([Completion(lease=listed[0].lease)], now=T0)
    after = store.job_list(JobFilter(state=JobState.RUNNING))
    assert [j.id for j in after] == sorted(running)[1:]
