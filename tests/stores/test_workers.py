"""Workers: registration, heartbeats, dead-worker detection (its leases are returned at
once) and pruning; and the maintenance lease. Time moves through ``now=`` only."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from store_helpers import T0, add, claim, claim_one, complete, fail, get, release, spec

from crawlq.config import DEAD_AFTER
from crawlq.jobs import JobState, WorkerInfo, WorkerState
from crawlq.stores.base import JobFilter, Store


def info(worker_id: str = "w1", **fields: object) -> WorkerInfo:
    """A worker as it registers: identity and counters; the store sets the rest."""
    values: dict[str, object] = {
        "id": worker_id,
        "host": "box-1",
        "pid": 4242,
        "queues": ("q", "other"),
        "runtime": "thread",
        "concurrency": 8,
    }
    values.update(fields)
    return WorkerInfo(**values)  # type: ignore[arg-type]


def workers(store: Store) -> dict[str, WorkerInfo]:
    return {w.id: w for w in store.worker_list(now=T0)}


def beat(store: Store, worker_id: str = "w1", *, now: float, running: int = 0) -> bool:
    return store.worker_heartbeat(
        worker_id, running=running, done=0, failed=0, rss_bytes=None, now=now
    )


def stop(store: Store, worker_id: str = "w1", *, now: float) -> None:
    store.worker_stop(worker_id, done=0, failed=0, now=now)


# -- register, heartbeat, stop, list -------------------------------------------------------


def test_register_records_the_worker_alive_started_now(store: Store) -> None:
    assert store.worker_list(now=T0) == []
    store.worker_register(info(started_at=1.0, last_heartbeat=2.0), now=T0)
    [w] = store.worker_list(now=T0)
    assert w == info(started_at=T0, last_heartbeat=T0, state=WorkerState.ALIVE)
    assert w.queues == ("q", "other") and w.rss_bytes is None and w.stopped_at is None
    assert w.state == "alive"


def test_register_again_replaces_the_record(store: Store) -> None:
    store.worker_register(info(pid=1, rss_bytes=10), now=T0)
    stop(store, "w1", now=T0 + 5)
    store.worker_register(info(pid=2, runtime="asyncio", concurrency=100), now=T0 + 10)
    [w] = store.worker_list(now=T0 + 10)
    assert (w.pid, w.runtime, w.concurrency, w.rss_bytes) == (2, "asyncio", 100, None)
    assert (w.state, w.started_at, w.last_heartbeat, w.stopped_at) == (
        WorkerState.ALIVE,
        T0 + 10,
        T0 + 10,
        None,
    )


def test_heartbeat_records_counters_and_the_time(store: Store) -> None:
    store.worker_register(info(), now=T0)
    assert store.worker_heartbeat(
        "w1", running=3, done=120, failed=4, rss_bytes=256 * 2**20, now=T0 + 7.5
    )
    w = workers(store)["w1"]
    assert (w.running, w.done, w.failed, w.rss_bytes) == (3, 120, 4, 256 * 2**20)
    assert (w.started_at, w.last_heartbeat) == (T0, T0 + 7.5)
    assert store.worker_heartbeat("w1", running=0, done=121, failed=4, rss_bytes=None, now=T0 + 9)
    assert workers(store)["w1"].rss_bytes is None


def test_heartbeat_of_an_unknown_worker_is_refused(store: Store) -> None:
    assert not beat(store, "nobody", now=T0)
    assert store.worker_list(now=T0) == []


def test_stop_is_a_clean_exit(store: Store) -> None:
    store.worker_register(info(), now=T0)
    stop(store, "w1", now=T0 + 3)
    w = workers(store)["w1"]
    assert (w.state, w.stopped_at) == (WorkerState.STOPPED, T0 + 3)
    assert not beat(store, now=T0 + 4)
    assert workers(store)["w1"] == w
    stop(store, "nobody", now=T0)  # unknown: nothing happens
    assert [x.id for x in store.worker_list(now=T0)] == ["w1"]


def test_stop_records_the_final_counters(store: Store) -> None:
    """A burst worker may stop before its first heartbeat: its record still says what it
    did."""
    store.worker_register(info(), now=T0)
    store.worker_register(info("w2"), now=T0)
    assert store.worker_heartbeat("w2", running=2, done=1, failed=0, rss_bytes=9, now=T0 + 1)
    store.worker_stop("w1", done=7, failed=2, now=T0 + 2)
    store.worker_stop("w2", done=40, failed=1, now=T0 + 3)
    by_id = workers(store)
    assert (by_id["w1"].state, by_id["w1"].done, by_id["w1"].failed) == ("stopped", 7, 2)
    assert (by_id["w2"].running, by_id["w2"].done, by_id["w2"].failed) == (0, 40, 1)
    assert by_id["w2"].rss_bytes == 9  # the last one reported
    assert store.worker_reap(dead_after=1, now=T0 + 100) == []
    store.worker_register(info("w3"), now=T0)
    assert store.worker_reap(dead_after=1, now=T0 + 100) == ["w3"]
    store.worker_stop("w3", done=5, failed=5, now=T0 + 101)  # dead: left as it is
    assert (workers(store)["w3"].state, workers(store)["w3"].done) == ("dead", 0)


def test_list_shows_an_alive_worker_whose_heartbeat_is_overdue_as_lost(store: Store) -> None:
    """Nobody may be running to reap a crashed worker: the listing judges by the age of
    its heartbeat, whatever the store holds."""
    store.worker_register(info("crashed"), now=T0)
    store.worker_register(info("beating"), now=T0 + 1)
    store.worker_register(info("stopped"), now=T0 + 2)
    stop(store, "stopped", now=T0 + 3)

    def states(now: float) -> list[tuple[str, WorkerState]]:
        return [(w.id, w.state) for w in store.worker_list(now=now)]

    assert states(T0 + DEAD_AFTER) == [
        ("crashed", "alive"),  # not older than DEAD_AFTER yet
        ("beating", "alive"),
        ("stopped", "stopped"),
    ]
    assert beat(store, "beating", now=T0 + 540)
    store.worker_register(info("crashed-later"), now=T0 + 3)
    assert states(T0 + 540) == [
        ("beating", "alive"),
        ("crashed", "lost"),  # nine minutes later, and no worker ran to reap it
        ("crashed-later", "lost"),  # alive, then lost, then the others: each by start
        ("stopped", "stopped"),
    ]
    [crashed] = [w for w in store.worker_list() if w.id == "crashed"]  # the store's clock
    assert crashed.state is WorkerState.LOST
    # Only the listing says so: it is still alive to the store, so it can be reaped, or
    # come back.
    assert beat(store, "crashed", now=T0 + 541)
    assert states(T0 + 541)[:2] == [("crashed", "alive"), ("beating", "alive")]
    assert store.worker_reap(dead_after=DEAD_AFTER, now=T0 + 600) == [
        "beating",
        "crashed",
        "crashed-later",
    ]
    assert {state for _, state in states(T0 + 600)} == {"dead", "stopped"}


def test_register_keeps_the_process_identity(store: Store) -> None:
    process = "linux:0b1d2e3f-aaaa-bbbb-cccc-1234567890ab:4026531836:4242:981234"
    store.worker_register(info(process=process), now=T0)
    store.worker_register(info("w2"), now=T0)
    assert workers(store)["w1"].process == process
    assert workers(store)["w2"].process is None
    store.worker_register(info(), now=T0 + 1)  # registered again, from elsewhere
    assert workers(store)["w1"].process is None


def test_list_shows_alive_workers_first_then_by_start(store: Store) -> None:
    store.worker_register(info("old-stopped"), now=T0)
    store.worker_register(info("b"), now=T0 + 2)
    store.worker_register(info("a"), now=T0 + 2)
    store.worker_register(info("first"), now=T0 + 1)
    store.worker_register(info("dead"), now=T0 + 1.5)
    stop(store, "old-stopped", now=T0 + 3)
    for w in ("a", "b", "first"):
        assert beat(store, w, now=T0 + 50)
    assert store.worker_reap(dead_after=30, now=T0 + 50) == ["dead"]
    assert [w.id for w in store.worker_list(now=T0 + 50)] == [
        "first",
        "a",
        "b",
        "old-stopped",
        "dead",
    ]


# -- reaping dead workers --------------------------------------------------------------


def test_reap_declares_overdue_workers_dead_and_spares_recent_ones(store: Store) -> None:
    store.worker_register(info("quiet"), now=T0)
    store.worker_register(info("busy"), now=T0)
    store.worker_register(info("gone"), now=T0)
    stop(store, "gone", now=T0 + 1)
    assert beat(store, "busy", now=T0 + 25)
    assert store.worker_reap(dead_after=30, now=T0 + 30) == []  # not older than 30 s yet
    assert store.worker_reap(dead_after=30, now=T0 + 31) == ["quiet"]
    by_id = workers(store)
    assert (by_id["quiet"].state, by_id["quiet"].stopped_at) == (WorkerState.DEAD, T0 + 31)
    assert by_id["busy"].state is WorkerState.ALIVE
    assert by_id["gone"].state is WorkerState.STOPPED  # a stopped worker is never reaped
    assert store.worker_reap(dead_after=30, now=T0 + 31) == []  # once
    assert store.worker_reap(dead_after=30, now=T0 + 56) == ["busy"]


def test_reap_declares_workers_named_gone_dead_at_once(store: Store) -> None:
    """The caller saw their process end: their jobs come back at once, not after
    dead_after; a stopped, dead, unknown or overdue worker is handled as usual."""
    for w in ("crashed", "alive", "stopped", "overdue"):
        store.worker_register(info(w), now=T0)
    stop(store, "stopped", now=T0)
    held = add(store, lease_seconds=3600)
    theirs = add(store, lease_seconds=3600)
    claim_one(store, worker="crashed", now=T0)
    other = claim_one(store, worker="alive", now=T0)
    for w in ("crashed", "alive"):
        assert beat(store, w, now=T0 + 50)
    gone = ["crashed", "stopped", "nobody", "crashed"]
    assert store.worker_reap(dead_after=30, gone=gone, now=T0 + 51) == ["crashed", "overdue"]
    job = get(store, held)
    assert (job.state, job.attempts, job.lease_token) == (JobState.PENDING, 1, None)
    assert job.last_error is not None and "process gone" in job.last_error
    assert get(store, theirs).lease_token == other.lease_token
    by_id = workers(store)
    assert [by_id[w].state for w in ("crashed", "alive", "stopped", "overdue")] == [
        "dead",
        "alive",
        "stopped",
        "dead",
    ]
    assert not beat(store, "crashed", now=T0 + 52)
    assert store.worker_reap(dead_after=30, gone=["crashed"], now=T0 + 52) == []  # once
    assert [j.id for j in claim(store, worker="w3", now=T0 + 52)] == [held]


def test_heartbeat_of_a_dead_worker_is_refused_and_changes_nothing(store: Store) -> None:
    store.worker_register(info(), now=T0)
    assert store.worker_reap(dead_after=10, now=T0 + 11) == ["w1"]
    before = workers(store)["w1"]
    assert not store.worker_heartbeat("w1", running=1, done=2, failed=3, rss_bytes=4, now=T0 + 12)
    assert workers(store)["w1"] == before
    stop(store, "w1", now=T0 + 13)  # a dead worker stays dead
    assert workers(store)["w1"] == before


def test_reap_returns_a_dead_workers_leases_at_once(store: Store) -> None:
    store.worker_register(info("w1"), now=T0)
    store.worker_register(info("w2"), now=T0)
    mine = [add(store, lease_seconds=3600) for _ in range(2)]
    other = add(store, lease_seconds=3600)
    held = claim(store, limit=2, worker="w1", now=T0)
    assert [j.id for j in held] == mine
    theirs = claim_one(store, worker="w2", now=T0)
    assert theirs.id == other
    assert beat(store, "w2", now=T0 + 20)

    assert store.worker_reap(dead_after=15, now=T0 + 20) == ["w1"]
    for job in held:  # pending again long before the lease would expire
        now_job = get(store, job.id)
        assert now_job.state is JobState.PENDING
        assert now_job.attempts == 1
        assert now_job.lease_token is None and now_job.lease_expires_at is None
        assert now_job.last_error is not None and "worker" in now_job.last_error
        assert now_job.dead_reason is None
    assert get(store, other).state is JobState.RUNNING  # w2 is alive: untouched
    assert get(store, other).lease_token == theirs.lease_token

    again = claim(store, limit=5, worker="w3", now=T0 + 20)  # claimable again right away
    assert sorted(j.id for j in again) == mine
    assert all(j.attempts == 2 for j in again)


def test_the_dead_workers_old_leases_are_stale(store: Store) -> None:
    store.worker_register(info(), now=T0)
    for _ in range(3):
        add(store, lease_seconds=3600)
    a, b, c = claim(store, limit=3, worker="w1", now=T0)
    assert store.worker_reap(dead_after=5, now=T0 + 6) == ["w1"]
    assert store.job_heartbeat([a.lease], now=T0 + 7) == [False]
    assert not complete(store, b.lease, now=T0 + 7, children=[spec(queue="kids")])
    assert not fail(store, c.lease, now=T0 + 7, retry_delay=1.0)
    assert not fail(store, c.lease, now=T0 + 7, retry_delay=None)
    assert not release(store, a.lease, now=T0 + 7)
    for job in (a, b, c):
        assert get(store, job.id).state is JobState.PENDING
    assert store.job_list(JobFilter(queue="kids")) == []
    # The new holder's lease works; the old one still does not.
    new = claim_one(store, worker="w2", now=T0 + 8)
    [old] = [x for x in (a, b, c) if x.id == new.id]
    assert not complete(store, old.lease, now=T0 + 9)
    assert complete(store, new.lease, now=T0 + 9)


def test_reap_of_a_job_with_no_attempts_left_makes_it_dead_worker_lost(store: Store) -> None:
    store.worker_register(info(), now=T0)
    job_id = add(store, max_attempts=1, lease_seconds=3600)
    job = claim_one(store, now=T0)
    assert job.attempts == job.max_attempts == 1
    assert store.worker_reap(dead_after=5, now=T0 + 6) == ["w1"]
    dead = get(store, job_id)
    assert dead.state is JobState.DEAD
    assert dead.dead_reason == "worker_lost"
    assert dead.last_error is not None and "declared dead" in dead.last_error
    assert dead.finished_at == T0 + 6
    assert dead.lease_token is None
    assert claim(store, now=T0 + 7) == []


def test_reap_keeps_the_bookkeeping_of_an_expired_lease(store: Store) -> None:
    """Counters, and the remembered request of a keyed job that dies, as for expiry."""
    store.worker_register(info(), now=T0)
    dies = add(store, key="k", max_attempts=1, lease_seconds=3600)
    retried = add(store, max_attempts=3, lease_seconds=3600)
    claim(store, limit=2, now=T0)
    [deferred] = store.job_schedule([spec(key="k", args=[2])], now=T0 + 1)
    assert deferred.job_id == dies
    assert store.worker_reap(dead_after=5, now=T0 + 6) == ["w1"]
    assert get(store, dies).state is JobState.DEAD
    assert get(store, retried).state is JobState.PENDING
    followups = [j for j in store.job_list(JobFilter(queue="q")) if j.id not in (dies, retried)]
    assert len(followups) == 1 and followups[0].key == "k" and followups[0].args == [2]
    assert followups[0].state is JobState.PENDING
    [stats] = store.queue_stats(now=T0 + 6)
    assert (stats.due, stats.running, stats.dead) == (2, 0, 1)


def test_reap_spares_jobs_that_already_left_running(store: Store) -> None:
    store.worker_register(info(), now=T0)
    done_id = add(store, lease_seconds=3600)
    failed_id = add(store, lease_seconds=3600)
    d = claim_one(store, now=T0)
    f = claim_one(store, now=T0)
    assert complete(store, d.lease, now=T0 + 1)
    assert fail(store, f.lease, now=T0 + 1, retry_delay=100.0)
    assert store.worker_reap(dead_after=5, now=T0 + 6) == ["w1"]
    assert get(store, done_id).state is JobState.DONE
    failed = get(store, failed_id)
    assert (failed.state, failed.attempts, failed.last_error) == (JobState.PENDING, 1, "boom")


def test_a_job_reclaimed_after_expiry_by_another_worker_is_not_reaped(store: Store) -> None:
    """The reaped worker's lease expired and another worker holds the job now."""
    store.worker_register(info("w1"), now=T0)
    store.worker_register(info("w2"), now=T0)
    job_id = add(store, lease_seconds=10)
    claim_one(store, worker="w1", now=T0)
    assert store.job_expire_leases(now=T0 + 11) == [job_id]
    taken = claim_one(store, worker="w2", now=T0 + 11)
    assert beat(store, "w2", now=T0 + 12)
    assert store.worker_reap(dead_after=5, now=T0 + 12) == ["w1"]
    assert get(store, job_id).state is JobState.RUNNING
    assert store.job_heartbeat([taken.lease], now=T0 + 13) == [True]


# -- pruning ---------------------------------------------------------------------------


def test_prune_deletes_stopped_and_dead_workers_past_the_age(store: Store) -> None:
    store.worker_register(info("stopped-old"), now=T0)
    store.worker_register(info("dead-old"), now=T0)
    store.worker_register(info("stopped-new"), now=T0)
    store.worker_register(info("alive"), now=T0)
    stop(store, "stopped-old", now=T0 + 1)
    assert store.worker_reap(dead_after=1, now=T0 + 2) == ["alive", "dead-old", "stopped-new"]
    store.worker_register(info("alive"), now=T0 + 2)  # came back
    store.worker_register(info("stopped-new"), now=T0 + 2)
    stop(store, "stopped-new", now=T0 + 50)
    assert store.worker_prune(older_than=10, now=T0 + 20) == 2
    assert sorted(workers(store)) == ["alive", "stopped-new"]
    assert store.worker_prune(older_than=10, now=T0 + 20) == 0
    assert store.worker_prune(older_than=10, now=T0 + 1000) == 1
    assert sorted(workers(store)) == ["alive"]


# -- the maintenance lease -------------------------------------------------------------


def test_maintenance_lease_is_held_by_one_owner_until_it_expires(store: Store) -> None:
    assert store.maintenance_acquire("reap", "a", 10, now=T0)
    assert not store.maintenance_acquire("reap", "b", 10, now=T0 + 5)
    assert store.maintenance_acquire("prune", "b", 10, now=T0 + 5)  # another duty
    assert not store.maintenance_acquire("reap", "b", 10, now=T0 + 9.9)
    assert store.maintenance_acquire("reap", "b", 10, now=T0 + 10)  # expired: taken over
    assert not store.maintenance_acquire("reap", "a", 10, now=T0 + 11)


def test_maintenance_lease_is_renewed_by_its_owner(store: Store) -> None:
    assert store.maintenance_acquire("reap", "a", 10, now=T0)
    assert store.maintenance_acquire("reap", "a", 10, now=T0 + 8)  # renewed to T0 + 18
    assert not store.maintenance_acquire("reap", "b", 10, now=T0 + 15)
    assert store.maintenance_acquire("reap", "b", 10, now=T0 + 18)


@pytest.mark.parametrize("ttl", [0.5, 60.0])
def test_maintenance_lease_lasts_its_ttl(store: Store, ttl: float) -> None:
    assert store.maintenance_acquire("d", "a", ttl, now=T0)
    assert not store.maintenance_acquire("d", "b", ttl, now=T0 + ttl * 0.9)
    assert store.maintenance_acquire("d", "b", ttl, now=T0 + ttl)


def test_maintenance_lease_is_shared_by_every_store_object(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    other = open_same_store()
    assert store.maintenance_acquire("reap", "a", 10, now=T0)
    assert not other.maintenance_acquire("reap", "b", 10, now=T0 + 1)
    assert other.maintenance_acquire("reap", "b", 10, now=T0 + 10)
    assert not store.maintenance_acquire("reap", "a", 10, now=T0 + 11)


def test_a_registered_worker_is_seen_by_another_store_object(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    other = open_same_store()
    store.worker_register(info(), now=T0)
    assert [w.id for w in other.worker_list(now=T0)] == ["w1"]
    assert other.worker_list(now=T0) == store.worker_list(now=T0)
