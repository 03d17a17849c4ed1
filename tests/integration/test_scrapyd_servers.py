"""Three real ``scrapyd`` servers on one crawlq store (crawlq.scrapyd), each with its own
scrapyd.conf, directory and random port, the project egg built here and deployed with
addversion.json; jobs go through schedule.json on random servers and every spider writes
its ``_job`` to one ledger file (tests/scrapyd_pool.py)."""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlq.jobs import JobState
from crawlq.stores import open_store
from crawlq.stores.base import JobFilter, Store
from tests import servers
from tests.integration.conftest import STORE_URLS, wait_until
from tests.scrapyd_pool import Pool, Server, build_egg, idle

PROJECTS = ("alpha", "beta")


@pytest.fixture(scope="module")
def egg(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return build_egg(tmp_path_factory.mktemp("ledgerbot"))


@pytest.fixture
def pool_factory(tmp_path: Path, egg: bytes) -> Iterator[object]:
    pools: list[Pool] = []

    def make(store: str | None, n: int = 3, **options: float) -> Pool:
        pool = Pool(tmp_path, n, store=store, **options)
        pools.append(pool)
        pool.start()
        pool.deploy(egg, *PROJECTS)
        return pool

    yield make
    for pool in pools:
        pool.stop()


def scrapyd_jobs(store: Store) -> dict[str, object]:
    """_job -> crawlq Job, for every Scrapyd job in the store."""
    jobs = store.job_list(JobFilter())
    return {str(j.kwargs["_job"]): j for j in jobs if j.queue.startswith("scrapyd:")}


def run_many(pool: Pool, store_url: str, count: int) -> None:
    """``count`` jobs on random servers and projects, behind 6 blockers that fill every
    slot, so that the claim order shows priority then age across projects."""
    rng = random.Random(count)
    ledger = str(pool.ledger)
    hold = ledger + ".go"
    blockers = [pool.servers[i % 3].schedule("alpha", ledger=ledger, hold=hold) for i in range(6)]
    wait_until(
        lambda: sum(s.call("daemonstatus.json")["running"] for s in pool.servers) == 6,
        60,
        "6 blockers running",
    )
    wanted: dict[str, float] = {}
    for _ in range(count):
        priority = rng.choice((0, 0, 1, 5))
        server = rng.choice(pool.servers)
        project = rng.choice(PROJECTS)
        job = server.schedule(project, ledger=ledger, priority=priority, _version="1.0")
        wanted[job] = priority
    Path(hold).touch()  # the blockers end: the slots take the others in claim order
    everyone = set(blockers) | set(wanted)
    lines = pool.wait_for(len(everyone), 90 + count * 1.5)
    # every job exactly once
    ran = Counter(line["job"] for line in lines)
    assert set(ran) == everyone and set(ran.values()) == {1}, ran
    # spread over the servers
    nodes = Counter(line["node"] for line in lines)
    assert set(nodes) == {"s1", "s2", "s3"}, nodes
    # claim order: priority first, then age, across both projects
    store = open_store(store_url)
    try:
        jobs = scrapyd_jobs(store)
        wait_until(
            lambda: all(j.state is JobState.DONE for j in scrapyd_jobs(store).values()),
            30,
            "all done",
        )
    finally:
        store.close()
    # one claim takes several jobs at one instant, in claim order
    claimed = sorted(wanted, key=lambda job: (jobs[job].started_at, -wanted[job], jobs[job].id))
    expected = sorted(wanted, key=lambda job: (-wanted[job], jobs[job].id))
    assert claimed == expected
    # every server tells the same story
    wait_until(lambda: all(idle(s) for s in pool.servers), 30, "servers idle")
    finished = [sorted(j["id"] for j in s.call("listjobs.json")["finished"]) for s in pool.servers]
    assert finished[0] == finished[1] == finished[2]
    assert set(finished[0]) <= everyone
    assert len(finished[0]) == min(100, len(everyone))
    status = [s.call("daemonstatus.json") for s in pool.servers]
    assert {(d["pending"], d["running"], d["finished"]) for d in status} == {
        (0, 0, len(finished[0]))
    }


def test_three_servers_run_every_job_once_in_priority_order(pool_factory, store_url: str) -> None:
    run_many(pool_factory(store_url), store_url, 12)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("RUN_SLOW"), reason="RUN_SLOW=1 runs the 200-job form")
@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_two_hundred_jobs(pool_factory, tmp_path: Path, kind: str) -> None:
    url = STORE_URLS[kind](tmp_path)
    run_many(pool_factory(url), url, 200)


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_kill_9_of_a_server_loses_no_job(pool_factory, tmp_path: Path, kind: str) -> None:
    """The killed server's running jobs run again elsewhere after their lease."""
    store_url = STORE_URLS[kind](tmp_path)
    pool = pool_factory(store_url, lease=3.0, max_proc=1)
    victim = pool.servers[0]
    ledger = str(pool.ledger)
    hold = str(pool.ledger) + ".go"
    jobs = [pool.servers[i % 3].schedule("beta", ledger=ledger, hold=hold) for i in range(3)]
    wait_until(lambda: len(pool.lines()) == 3, 60, "3 jobs running, 1 on each server")
    first = {line["job"]: line["node"] for line in pool.lines()}
    victim.kill()
    Path(hold).touch()
    jobs += [pool.servers[1].schedule("beta", ledger=ledger, sleep=0) for _ in range(2)]
    store = open_store(store_url)
    try:
        wait_until(
            lambda: (
                all(j.state is JobState.DONE for j in scrapyd_jobs(store).values())
                and len(scrapyd_jobs(store)) == len(jobs)
            ),
            120,
            "every job done",
        )
        done = scrapyd_jobs(store)
    finally:
        store.close()
    ran = Counter(line["job"] for line in pool.lines())
    assert set(ran) == set(jobs)
    killed = {job for job, node in first.items() if node == "s1"}
    assert len(killed) == 1, first
    # the survivors said so in Scrapyd's log (crawlq's logging goes there)
    assert any("expired leases" in s.log() for s in pool.servers[1:])
    for job in killed:  # started on s1, killed with it, finished elsewhere
        assert ran[job] == 2 and done[job].worker_id and ":s1:" not in done[job].worker_id


def test_cancel_reaches_every_server(pool_factory, tmp_path: Path) -> None:
    """cancel.json on any server: a pending job is gone everywhere, a running one is
    stopped on the server that runs it; listjobs.json agrees on every server."""
    url = STORE_URLS["sqlite"](tmp_path)
    pool = pool_factory(url, n=3, max_proc=1)
    s1, s2, s3 = pool.servers
    ledger = str(pool.ledger)
    long = [s1.schedule("alpha", ledger=ledger, sleep=60) for _ in range(3)]
    wait_until(lambda: len(pool.lines()) == 3, 60, "3 long jobs running")
    waiting = s1.schedule("beta", ledger=ledger, sleep=0)
    for server in pool.servers:
        listing = server.call("listjobs.json")
        assert [j["id"] for j in listing["pending"]] == [waiting]
        assert len(listing["running"]) == 1
        status = server.call("status.json", job=waiting)
        assert status["currstate"] == "pending"
    assert s2.call("cancel.json", {"project": "beta", "job": waiting})["prevstate"] == "pending"
    runs_on = {line["job"]: line["node"] for line in pool.lines()}
    target = next(job for job in long if runs_on[job] != "s3")
    answer = s3.call("cancel.json", {"project": "alpha", "job": target})
    assert answer["prevstate"] in ("pending", "running")  # stopped on its own server
    wait_until(
        lambda: any(j["id"] == target for j in s3.call("listjobs.json")["finished"]),
        60,
        "the cancelled job finished",
    )
    for server in pool.servers:
        listing = server.call("listjobs.json")
        assert listing["pending"] == []
        assert [j["id"] for j in listing["finished"]] == [target]
    store = open_store(url)
    try:
        states = {job: j.state for job, j in scrapyd_jobs(store).items()}
    finally:
        store.close()
    assert states[waiting] is JobState.CANCELLED and states[target] is JobState.CANCELLED
    assert waiting not in {line["job"] for line in pool.lines()}


def scheduled(server: Server, ledger: str) -> str | None:
    """schedule.json once: the job id, or None if the server answered with an error."""
    answer = server.call("schedule.json", {"project": "beta", "spider": "ledger", "ledger": ledger})
    return str(answer["jobid"]) if answer["status"] == "ok" else None


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_store_restart_mid_run(pool_factory, tmp_path: Path, kind: str) -> None:
    """The store goes down while jobs run: schedule.json fails with a clear error, the
    servers keep running and polling, and every job accepted ends done."""
    timeouts = (
        "&pool_timeout=2&connect_timeout=2"
        if kind == "postgres"
        else "&socket_timeout=2&socket_connect_timeout=1"
    )
    url = STORE_URLS[kind](tmp_path) + timeouts
    server = servers.postgres() if kind == "postgres" else servers.redis()
    pool = pool_factory(url, lease=10.0, max_proc=1)
    ledger = str(pool.ledger)
    jobs = [pool.servers[i % 3].schedule("alpha", ledger=ledger, sleep=1) for i in range(4)]
    wait_until(lambda: len(pool.lines()) >= 2, 60, "jobs running")
    server.stop()
    try:
        answer = pool.servers[2].call(
            "schedule.json", {"project": "beta", "spider": "ledger", "ledger": ledger}
        )
        assert answer["status"] == "error"
        assert "was not scheduled; schedule it again once the store is back" in answer["message"]
        time.sleep(1)
    finally:
        server.start()
    # the servers' connection pools reconnect by themselves (within a few seconds)
    again: list[str | None] = []
    wait_until(
        lambda: again.append(scheduled(pool.servers[0], ledger)) or again[-1],
        60,
        "scheduling again",
    )
    jobs += [str(again[-1])]
    jobs += [pool.servers[i % 3].schedule("beta", ledger=ledger, sleep=0) for i in range(2)]
    store = open_store(url)
    try:
        wait_until(
            lambda: (
                len(scrapyd_jobs(store)) == len(jobs)
                and all(j.state is JobState.DONE for j in scrapyd_jobs(store).values())
            ),
            120,
            "every job done after the restart",
        )
    finally:
        store.close()
    assert set(line["job"] for line in pool.lines()) == set(jobs)
    for s in pool.servers:
        assert s.proc is not None and s.proc.poll() is None


def test_a_stopped_server_gives_its_jobs_back_at_once(pool_factory, tmp_path: Path) -> None:
    """SIGTERM to a server: its spider is stopped and its job released (no attempt
    used), so another server runs it long before the lease (30 s) would lapse."""
    url = STORE_URLS["sqlite"](tmp_path)
    pool = pool_factory(url, n=2, max_proc=1, lease=30.0)
    hold = str(pool.ledger) + ".go"
    job = pool.servers[0].schedule("alpha", ledger=str(pool.ledger), hold=hold, crawlq_crawl=7)
    wait_until(lambda: len(pool.lines()) == 1, 60, "the job running")
    first = pool.lines()[0]["node"]
    stopped = next(s for s in pool.servers if s.name == first)
    began = time.monotonic()
    stopped.stop()
    wait_until(lambda: len(pool.lines()) == 2, 25, "the job running on the other server")
    assert time.monotonic() - began < 25
    assert pool.lines()[1]["node"] != first
    assert [line["crawl"] for line in pool.lines()] == ["7", "7"]  # a spider argument
    Path(hold).touch()
    store = open_store(url)
    try:
        wait_until(lambda: scrapyd_jobs(store)[job].state is JobState.DONE, 60, "the job done")
        assert scrapyd_jobs(store)[job].attempts == 1  # the released run did not count
    finally:
        store.close()


def test_a_server_starts_while_the_store_is_down(pool_factory, tmp_path: Path) -> None:
    """Scrapyd starts with its store down, refuses to schedule with a clear error, and
    runs jobs once the store is up, without a restart."""
    redis = servers.redis()
    url = STORE_URLS["redis"](tmp_path) + "&socket_timeout=2&socket_connect_timeout=1"
    redis.stop()
    try:
        pool = pool_factory(url, n=1, max_proc=1)
        assert scheduled(pool.servers[0], str(pool.ledger)) is None
        answer = pool.servers[0].call("schedule.json", {"project": "beta", "spider": "ledger"})
        assert "StoreUnavailable: the crawlq store cannot be reached" in answer["message"]
    finally:
        redis.start()
    # the spider gets its Scrapyd job id as _job, and a crawlq crawl id as a setting; the
    # restarted server may still be loading its append-only file: schedule again, as the
    # error says, until it is back
    fields = {"project": "beta", "spider": "ledger", "ledger": str(pool.ledger)}
    deadline = time.monotonic() + 20
    while True:
        answer = pool.servers[0].call("schedule.json", {**fields, "setting": "CRAWLQ_CRAWL=42"})
        if answer["status"] == "ok" or time.monotonic() > deadline:
            break
        assert "schedule it again once the store is back" in answer["message"], answer
        time.sleep(0.2)
    assert answer["status"] == "ok", answer
    job = str(answer["jobid"])
    [line] = pool.wait_for(1, 60)
    assert (line["job"], line["crawl"]) == (job, "42")
