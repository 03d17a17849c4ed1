"""Periodic schedules on every store: put, list, pause, resume, remove, and fires that
happen once per (schedule, fire time) whatever the number of schedulers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import pytest
from store_helpers import T0

from crawlq.jobs import JobSpec, JobState, Lease, Outcome
from crawlq.periodic import (
    CatchUp,
    Firing,
    Periodic,
    PeriodicInfo,
    plan_all,
)
from crawlq.stores.base import ClaimParams, Completion, Store
from crawlq.stores.periodic import PeriodicStore, periodic_store
from crawlq.types import Timestamp

OpenStore = Callable[[], Store]


def every(
    name: str = "p", seconds: float = 10.0, *, args: Sequence[int] = (1,), **options: object
) -> Periodic:
    spec = JobSpec(queue="q", task="t", args=list(args), priority=3)
    return Periodic(name=name, spec=spec, every=seconds, **options)  # type: ignore[arg-type]


def put(store: Store, periodic: Periodic, now: Timestamp = T0) -> Outcome:
    return periodic_store(store).periodic_put(periodic, next_fire=periodic.next_after(now), now=now)


def fire(store: Store, now: Timestamp, limit: int = 100) -> list[tuple[str, float, str]]:
    records = periodic_store(store).periodic_fire_due(plan_all, limit=limit, now=now)
    return [(r.name, r.fire_at, r.outcome.value) for r in records]


def info(store: Store, name: str = "p") -> PeriodicInfo:
    found = periodic_store(store).periodic_get(name)
    assert found is not None
    return found


def test_every_store_keeps_schedules(store: Store) -> None:
    assert isinstance(store, PeriodicStore)


def test_put_creates_then_leaves_an_equal_definition_and_updates_a_changed_one(
    store: Store,
) -> None:
    ps = periodic_store(store)
    assert put(store, every()) is Outcome.CREATED
    assert put(store, every(), now=T0 + 3) is Outcome.UNCHANGED
    first = info(store)
    assert (first.revision, first.next_fire, first.paused) == (1, T0 + 10, False)
    assert first.periodic == every()
    assert ps.periodic_pause("p", now=T0)
    assert put(store, every(args=[2]), now=T0 + 12) is Outcome.UPDATED
    changed = info(store)
    assert (changed.revision, changed.next_fire, changed.paused) == (2, T0 + 20, True)
    assert changed.periodic.spec.args == [2]
    put(store, every("a"))
    assert [i.name for i in ps.periodic_list()] == ["a", "p"]


def test_a_due_schedule_fires_its_job_once_and_moves_on(store: Store) -> None:
    ps = periodic_store(store)
    put(store, every())
    assert fire(store, T0 + 9) == []
    assert ps.periodic_next() == T0 + 10
    assert fire(store, T0 + 10.5) == [("p", T0 + 10, "fired")]
    assert fire(store, T0 + 10.5) == []
    record = ps.periodic_fires("p")[0]
    assert record.job_id is not None and record.fired_at == T0 + 10.5
    job = store.job_get(record.job_id)
    assert job is not None
    assert (job.queue, job.task, job.args, job.priority) == ("q", "t", [1], 3)
    assert job.state is JobState.PENDING and job.run_at == T0 + 10.5
    now = info(store)
    assert (now.next_fire, now.last_fire, now.last_job) == (T0 + 20, T0 + 10, job.id)
    assert now.last_job_live


def test_fire_times_found_within_grace_each_fire(store: Store) -> None:
    put(store, every(grace=60))
    assert fire(store, T0 + 45) == [("p", T0 + 10, "fired")]
    assert fire(store, T0 + 45) == [("p", T0 + 20, "fired")]
    assert fire(store, T0 + 45) == [("p", T0 + 30, "fired")]
    assert fire(store, T0 + 45) == [("p", T0 + 40, "fired")]
    assert fire(store, T0 + 45) == []


@pytest.mark.parametrize("catch_up", ["once", "skip"])
def test_missed_fire_times_fire_once_or_not_at_all(store: Store, catch_up: str) -> None:
    put(store, every(grace=5, catch_up=CatchUp(catch_up)))
    # no scheduler from T0 to T0 + 63: fire times 10..60 passed; only 60 is within grace
    outcome = "fired" if catch_up == "once" else "missed"
    assert fire(store, T0 + 63) == [("p", T0 + 10, outcome)]
    assert fire(store, T0 + 63) == [("p", T0 + 60, "fired")]
    assert fire(store, T0 + 63) == []
    jobs = [r.job_id for r in periodic_store(store).periodic_fires("p")]
    assert len([j for j in jobs if j is not None]) == (2 if catch_up == "once" else 1)


def test_without_overlap_a_live_previous_job_skips_the_fire(store: Store) -> None:
    put(store, every(overlap=False))
    assert fire(store, T0 + 10) == [("p", T0 + 10, "fired")]
    assert fire(store, T0 + 20) == [("p", T0 + 20, "skipped")]
    [job] = store.job_claim(ClaimParams(queues=("q",), worker_id="w", limit=1, now=T0 + 21))
    assert fire(store, T0 + 30) == [("p", T0 + 30, "skipped")]
    assert job.lease_token is not None
    lease = Lease(job_id=job.id, token=job.lease_token)
    assert store.job_complete([Completion(lease=lease, result=None)], now=T0 + 31) == [True]
    assert fire(store, T0 + 40) == [("p", T0 + 40, "fired")]
    assert info(store).last_job != job.id


def test_with_overlap_jobs_stack(store: Store) -> None:
    put(store, every())
    assert fire(store, T0 + 10) == [("p", T0 + 10, "fired")]
    assert fire(store, T0 + 20) == [("p", T0 + 20, "fired")]


def test_a_paused_schedule_fires_nothing_and_resumes_from_the_next_fire_time(
    store: Store,
) -> None:
    ps = periodic_store(store)
    put(store, every())
    assert ps.periodic_pause("p", now=T0)
    assert info(store).paused
    assert fire(store, T0 + 100) == []
    assert ps.periodic_next() is None
    assert ps.periodic_resume("p", next_fire=T0 + 110, now=T0 + 100)
    assert not info(store).paused
    assert ps.periodic_resume("p", next_fire=T0 + 500, now=T0 + 100)  # not paused: no change
    assert info(store).next_fire == T0 + 110
    assert fire(store, T0 + 110) == [("p", T0 + 110, "fired")]
    assert not ps.periodic_pause("nope") and not ps.periodic_resume("nope", next_fire=T0)


def test_remove_deletes_the_schedule_and_its_ledger(store: Store) -> None:
    ps = periodic_store(store)
    put(store, every())
    fire(store, T0 + 10)
    assert ps.periodic_remove("p")
    assert not ps.periodic_remove("p")
    assert ps.periodic_get("p") is None and ps.periodic_fires("p") == []
    assert fire(store, T0 + 100) == []


def test_a_stale_plan_changes_nothing(open_same_store: OpenStore) -> None:
    """Two schedulers read the same due schedule: the second one's firing is refused."""
    one, two = open_same_store(), open_same_store()
    put(one, every())
    seen: list[Firing] = []

    def remember(infos: Sequence[PeriodicInfo], now: Timestamp) -> list[Firing]:
        seen.extend(plan_all(infos, now))
        return plan_all(infos, now)

    periodic_store(one).periodic_fire_due(remember, limit=10, now=T0 + 10)
    replay = periodic_store(two).periodic_fire_due(
        lambda infos, now: [*seen, *plan_all(infos, now)], limit=10, now=T0 + 10
    )
    assert replay == []
    assert len(periodic_store(two).periodic_fires("p")) == 1


def test_a_fire_time_in_the_ledger_never_fires_again(store: Store) -> None:
    ps = periodic_store(store)
    put(store, every())
    assert fire(store, T0 + 10) == [("p", T0 + 10, "fired")]
    # the definition changes and the new one's next fire time is one already fired
    ps.periodic_put(every(args=[2]), next_fire=T0 + 10, now=T0 + 11)
    assert fire(store, T0 + 11) == []
    assert info(store).next_fire == T0 + 20
    assert [r.fire_at for r in ps.periodic_fires("p")] == [T0 + 10]


def test_limit_of_due_schedules(store: Store) -> None:
    for name in ("c", "a", "b"):
        put(store, every(name))
    first = fire(store, T0 + 10, limit=2)
    assert len(first) == 2 and first == sorted(first)
    rest = fire(store, T0 + 10, limit=2)
    assert sorted(first + rest) == [(n, T0 + 10, "fired") for n in ("a", "b", "c")]


def test_a_keyed_schedule_follows_its_conflict_policy(store: Store) -> None:
    spec = JobSpec(queue="q", task="t", key="only")
    periodic_store(store).periodic_put(
        Periodic(name="k", spec=spec, every=10), next_fire=T0 + 10, now=T0
    )
    fire(store, T0 + 10)
    fire(store, T0 + 20)
    ids = {r.job_id for r in periodic_store(store).periodic_fires("k")}
    assert len(ids) == 1  # the second fire updated the pending job of the key


def test_prune_keeps_recent_records_and_each_schedules_latest(store: Store) -> None:
    ps = periodic_store(store)
    put(store, every(grace=1000))
    for _ in range(5):
        fire(store, T0 + 50)
    assert ps.periodic_prune(older_than=15, now=T0 + 50) == 3
    assert [r.fire_at for r in ps.periodic_fires("p")] == [T0 + 40, T0 + 50]
    assert ps.periodic_prune(older_than=1, now=T0 + 1000) == 1
    assert [r.fire_at for r in ps.periodic_fires("p")] == [T0 + 50]


def test_racing_schedulers_fire_each_fire_time_exactly_once(open_same_store: OpenStore) -> None:
    stores = [open_same_store() for _ in range(4)]
    names = [f"s{i:02d}" for i in range(30)]
    for name in names:
        put(stores[0], every(name, grace=1000))
    start = threading.Barrier(len(stores))

    def scheduler(store: Store) -> None:
        start.wait()
        for _ in range(20):
            periodic_store(store).periodic_fire_due(plan_all, limit=7, now=T0 + 30)

    threads = [threading.Thread(target=scheduler, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ps = periodic_store(stores[0])
    for name in names:
        assert [r.fire_at for r in ps.periodic_fires(name)] == [T0 + 10, T0 + 20, T0 + 30]
    jobs = {r.job_id for name in names for r in ps.periodic_fires(name)}
    assert len(jobs) == 90 and None not in jobs
    assert sum(s.pending for s in stores[0].queue_stats(now=T0 + 30)) == 90
