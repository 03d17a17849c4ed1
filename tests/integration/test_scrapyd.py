"""crawlq.scrapyd's classes in this process, built as Scrapyd builds them, on every store:
the interfaces, what Scrapyd's own tests/test_spiderqueue.py and test_poller.py check, and
what a shared queue adds (lost races, claimable-only counts, priority across projects,
cancels that reach running jobs, one history for every server)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scrapyd.config import Config
from scrapyd.interfaces import IJobStorage, IPoller, ISpiderQueue
from twisted.internet.defer import Deferred
from zope.interface.verify import verifyObject

from crawlq.exceptions import ConfigurationError, StoreError
from crawlq.jobs import JobState
from crawlq.scrapyd import JobStorage, Poller, SpiderQueue
from crawlq.scrapyd.config import PLUGINS, app_for, close_apps
from crawlq.scrapyd.poller import JOB_KEY
from crawlq.stores.base import Completion, Failure

ARGS: dict[str, Any] = {"arg1": "val1", "arg2": 2, "arg3": "\N{SNOWMAN}"}


@pytest.fixture
def config(tmp_path: Path, store_url: str) -> Iterator[Any]:
    """A Scrapyd Config of a server with projects p1 and p2, on this test's store."""
    for project in ("p1", "p2"):
        (tmp_path / "eggs" / project).mkdir(parents=True)
    values = {"eggs_dir": str(tmp_path / "eggs"), "crawlq_store": store_url, **PLUGINS}
    yield Config(values=values)
    close_apps()


def fire(deferred: Deferred[Any]) -> Any:
    """The result of an already-fired Deferred (the reactor is not running here)."""
    results: list[Any] = []
    deferred.addBoth(results.append)
    assert results, "the Deferred has not fired"
    return results[0]


def test_interfaces(config: Any) -> None:
    verifyObject(ISpiderQueue, SpiderQueue(config, "p1"))
    verifyObject(IPoller, Poller(config))
    verifyObject(IJobStorage, JobStorage(config))


def test_add_pop_count_as_scrapyd_tests_them(config: Any) -> None:
    q = SpiderQueue(config, "p1")
    assert q.count() == 0
    q.add("spider1", 5, **ARGS)
    assert q.count() == 1
    assert q.pop() == {**ARGS, "name": "spider1"}
    assert q.count() == 0
    assert q.pop() is None


def test_messages_round_trip_as_json(config: Any) -> None:
    """ints stay ints, unicode intact, the settings dict and _job/_version kept."""
    q = SpiderQueue(config, "p1")
    message = {
        "_job": "j1",
        "_version": "1.0",
        "settings": {"DOWNLOAD_DELAY": "2", "X": "\N{SNOWMAN}"},
        "n": 3,
        "s": "caf\u00e9 \U0001f600",
    }
    q.add("spider1", 0.0, **message)
    assert q.list() == [{**message, "name": "spider1"}]
    assert q.pop() == {**message, "name": "spider1"}


def test_list_and_clear(config: Any) -> None:
    q = SpiderQueue(config, "p1")
    assert q.list() == []
    q.add("spider1", 5, **ARGS)
    q.add("spider1", 5, **ARGS)
    assert q.list() == [{**ARGS, "name": "spider1"}] * 2
    assert q.count() == 2
    q.clear()
    assert q.count() == 0
    assert q.list() == []


def test_list_is_in_run_order_and_remove_returns_how_many(config: Any) -> None:
    q = SpiderQueue(config, "p1")
    for job, priority in (("low", 0), ("high", 2.5), ("mid", 1)):
        q.add("s", priority, _job=job)
    assert [m["_job"] for m in q.list()] == ["high", "mid", "low"]
    assert q.remove(lambda m: m["_job"] in ("mid", "nope")) == 1
    assert [m["_job"] for m in q.list()] == ["high", "low"]


def test_count_counts_only_jobs_claimable_now(config: Any) -> None:
    """A job waiting for its retry's backoff is pending (listed) but not counted, so
    Scrapyd's own ``while count(): pop()`` cannot spin on it."""
    q = SpiderQueue(config, "p1")
    q.add("s", 0, _job="a")
    store = app_for(q.settings).store
    [job] = store.job_claim(_claim_params(q.queue))
    assert store.job_fail([Failure(lease=job.lease, error="x", retry_delay=3600)]) == [True]
    assert q.count() == 0
    assert [m["_job"] for m in q.list()] == ["a"]
    assert q.pop() is None


def _claim_params(queue: str) -> Any:
    from crawlq.stores.base import ClaimParams

    return ClaimParams(queues=[queue], worker_id="test", limit=10)


def test_poller_gives_each_free_slot_the_best_job_across_projects(config: Any) -> None:
    """Priority first, then age, across every project; one claim per free slot."""
    p1, p2 = SpiderQueue(config, "p1"), SpiderQueue(config, "p2")
    p1.add("s1", 0, _job="old-low")
    p2.add("s2", 0, _job="new-low")
    p2.add("s2", 3, _job="high")
    p1.add("s1", 1, _job="mid")
    poller = Poller(config)
    slots = [poller.next(), poller.next()]
    fire(poller.poll())
    got = [fire(d) for d in slots]
    assert [(m["_project"], m["_spider"], m["_job"]) for m in got] == [
        ("p2", "s2", "high"),
        ("p1", "s1", "mid"),
    ]
    assert all(m[JOB_KEY].state is JobState.RUNNING for m in got)
    assert p1.count() + p2.count() == 2  # leased, not lost: the others still wait
    third = poller.next()
    fire(poller.poll())
    assert fire(third)["_job"] == "old-low"


def test_poller_takes_nothing_without_a_free_slot(config: Any) -> None:
    SpiderQueue(config, "p1").add("s", 0, _job="a")
    poller = Poller(config)
    fire(poller.poll())
    assert SpiderQueue(config, "p1").count() == 1


def test_poller_survives_a_lost_race_and_an_empty_queue(config: Any) -> None:
    """Two servers polling for one job: one gets it, the other nothing, and no error
    (Scrapyd 1.6.0's own poller raises AttributeError here)."""
    SpiderQueue(config, "p1").add("s", 0, _job="only")
    a, b = Poller(config), Poller(config)
    da, db = a.next(), b.next()
    fire(a.poll())
    fire(b.poll())
    assert fire(da)["_job"] == "only"
    assert not db.called
    fire(b.poll())
    assert not db.called


def test_poller_keeps_polling_through_a_store_outage(tmp_path: Path) -> None:
    """An unreachable store: the poll logs and returns; scheduling fails clearly (nothing
    listens at the URL's port: a permanent StoreError, not StoreUnavailable, as the store
    was never reached)."""
    (tmp_path / "eggs" / "p1").mkdir(parents=True)
    url = "postgresql://nobody@127.0.0.1:1/x?connect_timeout=1&pool_timeout=1"
    config = Config(values={"eggs_dir": str(tmp_path / "eggs"), "crawlq_store": url, **PLUGINS})
    try:
        poller = Poller(config)
        slot = poller.next()
        assert fire(poller.poll()) is None
        assert fire(poller.poll()) is None
        assert not slot.called
        with pytest.raises(StoreError, match="refused job 'a', so it was not scheduled"):
            SpiderQueue(config, "p1").add("s", 0, _job="a")
    finally:
        close_apps()


def test_poller_refuses_scrapyds_own_launcher(config: Any, tmp_path: Path) -> None:
    values = {"eggs_dir": str(tmp_path / "eggs"), "crawlq_store": "sqlite:///x.db"}
    with pytest.raises(ConfigurationError, match=r"launcher = crawlq\.scrapyd\.Launcher"):
        Poller(Config(values={**values, **PLUGINS, "launcher": "scrapyd.launcher.Launcher"}))


def test_remove_cancels_pending_and_running_jobs_everywhere(config: Any) -> None:
    q = SpiderQueue(config, "p1")
    q.add("s", 0, _job="run")
    q.add("s", 0, _job="wait")
    poller = Poller(config)
    slot = poller.next()
    fire(poller.poll())
    running = fire(slot)[JOB_KEY]
    assert q.remove(lambda m: m["_job"] in ("run", "wait")) == 2
    store = app_for(q.settings).store
    assert store.job_heartbeat([running.lease]) == [False]  # its server stops it
    assert store.job_get(running.id).state is JobState.CANCELLED
    assert q.list() == []


def test_job_storage_shows_every_servers_history_newest_first(config: Any) -> None:
    q1, q2 = SpiderQueue(config, "p1"), SpiderQueue(config, "p2")
    q1.add("s1", 0, _job="first")
    q2.add("s2", 0, _job="second")
    q1.add("s1", 0, _job="never-ran")
    q1.remove(lambda m: m["_job"] == "never-ran")
    store = app_for(q1.settings).store
    for queue in (q1.queue, q2.queue):
        [job] = store.job_claim(_claim_params(queue))
        assert store.job_complete([Completion(lease=job.lease)]) == [True]
    for storage in (JobStorage(config), JobStorage(config)):  # any server
        listed = [(j.project, j.spider, j.job, j.state) for j in storage]
        assert listed == [("p2", "s2", "second", "done"), ("p1", "s1", "first", "done")]
        assert len(storage) == 2
        assert all(j.start_time <= j.end_time for j in storage.list())
