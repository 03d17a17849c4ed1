"""Limits: max_running, min_interval and blocked_until per limit key, enforced inside the
claim; where a key's settings come from; limit_get / limit_list; pruning of idle keys; and
max_running under concurrent claimers. Time moves through ``now=`` only, except in the
concurrency test."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from store_helpers import (
    T0,
    add,
    all_jobs,
    claim,
    claim_one,
    complete,
    crawl_counts,
    fail,
    get,
    ids,
    key_limit,
    new_crawl,
    release,
    schedule,
    spec,
    stats_by_queue,
    worker,
)

from crawlq.jobs import JobState, Outcome
from crawlq.limits import KeyLimit, Limits
from crawlq.stores.base import ClaimParams, Completion, JobFilter, Store
from crawlq.types import JobId


def keyed(store: Store, key: str, n: int, now: float = T0, **fields: Any) -> list[JobId]:
    """Schedule ``n`` new jobs of limit key ``key``, in one batch."""
    results = schedule(store, *(spec(limit_key=key, args=[i], **fields) for i in range(n)), now=now)
    return [r.job_id for r in results]


# -- max_running ---------------------------------------------------------------------------


def test_max_running_one_claims_one_job_of_the_key(store: Store) -> None:
    store.limit_set("k", Limits(max_running=1), now=T0)
    jobs = keyed(store, "k", 4)
    [first] = claim(store, limit=10)
    assert first.id == jobs[0]
    assert first.limit_key == "k"
    assert claim(store, limit=10) == []
    assert claim(store, limit=10, now=T0 + 1000) == []
    assert key_limit(store, "k").running == 1
    assert complete(store, first.lease, now=T0 + 1)
    assert key_limit(store, "k", now=T0 + 1).running == 0
    assert ids(claim(store, limit=10, now=T0 + 1)) == [jobs[1]]


EXITS = ["complete", "fail_retry", "fail_dead", "release", "expire", "reap", "cancel"]


@pytest.mark.parametrize("exit", EXITS)
def test_every_way_out_of_running_frees_the_key(store: Store, exit: str) -> None:
    store.limit_set("k", Limits(max_running=1), now=T0)
    store.worker_register(worker("w1"), now=T0)
    jobs = keyed(store, "k", 3, lease_seconds=10, max_attempts=3)
    first = claim_one(store, worker="w1")
    assert first.id == jobs[0]
    assert claim(store, limit=10, now=T0 + 5) == []
    after = T0 + 5
    if exit == "complete":
        assert complete(store, first.lease, now=after)
    elif exit == "fail_retry":
        assert fail(store, first.lease, now=after, retry_delay=1000)
    elif exit == "fail_dead":
        assert fail(store, first.lease, now=after, retry_delay=None)
    elif exit == "release":
        assert release(store, first.lease, now=after, delay=1000)
    elif exit == "expire":
        after = T0 + 11
        assert store.job_expire_leases(now=after) == [first.id]
    elif exit == "reap":
        after = T0 + 6
        assert store.worker_reap(dead_after=5, now=after) == ["w1"]
    else:
        assert store.job_cancel([first.id], now=after) == [first.id]
    assert get(store, first.id).state is not JobState.RUNNING
    assert key_limit(store, "k", now=after).running == 0
    [second] = claim(store, limit=10, now=after, worker="w2")
    assert second.limit_key == "k"
    if exit in ("expire", "reap"):  # pending again, due now: it may come first
        assert second.id in (first.id, jobs[1])
    else:
        assert second.id == jobs[1]
    assert claim(store, limit=10, now=after, worker="w2") == []
    assert key_limit(store, "k", now=after).running == 1


def test_max_running_three_claims_three_in_one_claim(store: Store) -> None:
    store.limit_set("k", Limits(max_running=3), now=T0)
    jobs = keyed(store, "k", 5)
    assert ids(claim(store, limit=10)) == jobs[:3]
    assert claim(store, limit=10) == []
    assert key_limit(store, "k").running == 3


def test_a_key_without_a_cap_gives_all_its_due_jobs_in_one_claim(store: Store) -> None:
    jobs = keyed(store, "k", 5)
    assert ids(claim(store, limit=10)) == jobs
    assert key_limit(store, "k").running == 5


def test_the_claim_limit_still_holds_with_keys(store: Store) -> None:
    store.limit_set("k", Limits(max_running=3), now=T0)
    jobs = keyed(store, "k", 5)
    assert ids(claim(store, limit=2)) == jobs[:2]
    assert ids(claim(store, limit=2)) == jobs[2:3]


# -- min_interval ----------------------------------------------------------------------------


def test_min_interval_spaces_the_starts_of_a_key(store: Store) -> None:
    store.limit_set("k", Limits(min_interval=10), now=T0)
    jobs = keyed(store, "k", 4)
    assert ids(claim(store, limit=10, now=T0)) == [jobs[0]]
    assert claim(store, limit=10, now=T0) == []
    assert claim(store, limit=10, now=T0 + 9.999) == []
    assert ids(claim(store, limit=10, now=T0 + 10)) == [jobs[1]]
    assert key_limit(store, "k", now=T0 + 10).last_start == T0 + 10
    assert claim(store, limit=10, now=T0 + 19) == []
    assert ids(claim(store, limit=10, now=T0 + 100)) == [jobs[2]], "one start per interval"
    assert claim(store, limit=10, now=T0 + 109) == []
    assert ids(claim(store, limit=10, now=T0 + 110)) == [jobs[3]]


def test_min_interval_counts_from_the_last_start_not_the_end(store: Store) -> None:
    store.limit_set("k", Limits(min_interval=10), now=T0)
    jobs = keyed(store, "k", 2)
    first = claim_one(store, now=T0)
    assert complete(store, first.lease, now=T0 + 8)
    assert claim(store, limit=10, now=T0 + 9) == []
    assert ids(claim(store, limit=10, now=T0 + 10)) == [jobs[1]]


def test_a_delayed_job_of_a_key_waits_for_its_own_run_at(store: Store) -> None:
    store.limit_set("k", Limits(min_interval=10), now=T0)
    first = add(store, limit_key="k")
    second = add(store, limit_key="k", delay=50)
    assert ids(claim(store, limit=10, now=T0)) == [first]
    assert claim(store, limit=10, now=T0 + 20) == []
    assert ids(claim(store, limit=10, now=T0 + 50)) == [second]


# -- blocked_until ---------------------------------------------------------------------------


def test_limit_block_later_wins_earlier_is_ignored(store: Store) -> None:
    store.limit_block("k", T0 + 50, now=T0)
    assert key_limit(store, "k").blocked_until == T0 + 50
    store.limit_block("k", T0 + 20, now=T0)
    assert key_limit(store, "k").blocked_until == T0 + 50
    store.limit_block("k", T0 + 60, now=T0)
    assert key_limit(store, "k").blocked_until == T0 + 60


def test_claim_respects_blocked_until(store: Store) -> None:
    jobs = keyed(store, "k", 2)
    store.limit_block("k", T0 + 60, now=T0)
    assert claim(store, limit=10, now=T0) == []
    assert claim(store, limit=10, now=T0 + 59.9) == []
    store.limit_block("k", T0 + 30, now=T0 + 1)  # earlier: changes nothing
    assert claim(store, limit=10, now=T0 + 59.9) == []
    assert ids(claim(store, limit=10, now=T0 + 60)) == jobs


def test_a_block_before_any_job_applies_to_later_jobs(store: Store) -> None:
    store.limit_block("k", T0 + 30, now=T0)
    [job] = keyed(store, "k", 1)
    assert claim(store, limit=10, now=T0 + 29) == []
    assert ids(claim(store, limit=10, now=T0 + 30)) == [job]


def test_a_block_does_not_touch_running_jobs(store: Store) -> None:
    keyed(store, "k", 2)
    running = claim_one(store)
    store.limit_block("k", T0 + 100, now=T0 + 1)
    assert get(store, running.id) == running
    assert store.job_heartbeat([running.lease], now=T0 + 2) == [True]
    assert complete(store, running.lease, now=T0 + 3)
    assert key_limit(store, "k", now=T0 + 3).running == 0
    assert claim(store, limit=10, now=T0 + 99) == []


def test_other_keys_and_unkeyed_jobs_flow_while_a_key_is_blocked(store: Store) -> None:
    blocked = keyed(store, "a", 3, priority=9)
    store.limit_block("a", T0 + 100, now=T0)
    unkeyed_high = add(store, priority=7)
    other_key = add(store, priority=5, limit_key="b")
    unkeyed_low = add(store, priority=1)
    assert ids(claim(store, limit=2)) == [unkeyed_high, other_key]
    assert ids(claim(store, limit=10)) == [unkeyed_low]
    assert claim(store, limit=10, now=T0 + 99) == []
    assert ids(claim(store, limit=10, now=T0 + 100)) == blocked


def test_within_a_key_the_order_is_priority_run_at_id(store: Store) -> None:
    store.limit_set("k", Limits(max_running=1), now=T0)
    plug = add(store, limit_key="k")
    assert claim_one(store).id == plug  # the key is at its cap: the next ones all wait
    low_old = add(store, limit_key="k", priority=0, run_at=T0 - 10)
    high_new = add(store, limit_key="k", priority=5, run_at=T0)
    high_old = add(store, limit_key="k", priority=5, run_at=T0 - 5)
    low_old_2 = add(store, limit_key="k", priority=0, run_at=T0 - 10)
    negative = add(store, limit_key="k", priority=-1, run_at=T0 - 100)
    running = get(store, plug)
    order = []
    for step in range(5):
        assert complete(store, running.lease, now=T0 + step)
        running = claim_one(store, now=T0 + step)
        order.append(running.id)
    assert order == [high_old, high_new, low_old, low_old_2, negative]


# -- where settings come from ----------------------------------------------------------------


def test_a_key_takes_the_limits_of_its_first_jobs_crawl(store: Store) -> None:
    store.limit_set_default("q", Limits(max_running=3), now=T0)
    c = new_crawl(
        store, *(spec(limit_key="site", args=[i]) for i in range(3)), limits=Limits(max_running=1)
    )
    assert len(claim(store, limit=10)) == 1
    record = key_limit(store, "site")
    assert (record.limits, record.override) == (Limits(max_running=1), False)
    # a later job outside the crawl uses the key's fixed settings
    add(store, limit_key="site")
    assert claim(store, limit=10) == []
    assert c.limits == Limits(max_running=1)


def test_a_key_takes_the_queue_default(store: Store) -> None:
    store.limit_set_default("q", Limits(max_running=2, min_interval=0.5), now=T0)
    keyed(store, "k", 4)
    assert len(claim(store, limit=10)) == 1, "min_interval 0.5"
    assert len(claim(store, limit=10, now=T0 + 0.5)) == 1
    assert claim(store, limit=10, now=T0 + 1) == [], "max_running 2"
    record = key_limit(store, "k", now=T0 + 1)
    assert (record.limits, record.override) == (Limits(max_running=2, min_interval=0.5), False)
    # a crawl without limits takes the queue default too
    new_crawl(store, spec(limit_key="other"), spec(limit_key="other"))
    assert key_limit(store, "other").limits == Limits(max_running=2, min_interval=0.5)
    # the default of another queue does not apply
    add(store, queue="elsewhere", limit_key="free")
    assert key_limit(store, "free").limits == Limits()


def test_a_key_keeps_the_settings_it_was_given(store: Store) -> None:
    store.limit_set_default("q", Limits(max_running=2), now=T0)
    keyed(store, "k", 4)
    store.limit_set_default("q", Limits(max_running=4), now=T0)
    assert len(claim(store, limit=10)) == 2
    assert key_limit(store, "k").limits == Limits(max_running=2)
    store.limit_set_default("q", None, now=T0)
    keyed(store, "fresh", 3)
    assert key_limit(store, "fresh").limits == Limits()
    assert len(claim(store, ["q"], limit=10)) == 3


def test_no_default_means_no_limit(store: Store) -> None:
    keyed(store, "k", 3)
    record = key_limit(store, "k")
    assert (record.limits, record.override) == (Limits(), False)
    assert record.limits.max_running is None and record.limits.min_interval == 0


def test_an_override_wins_over_defaults(store: Store) -> None:
    store.limit_set_default("q", Limits(max_running=5), now=T0)
    store.limit_set("k", Limits(max_running=1), now=T0)
    new_crawl(store, *(spec(limit_key="k") for _ in range(3)), limits=Limits(max_running=4))
    keyed(store, "k", 2)
    assert len(claim(store, limit=10)) == 1
    record = key_limit(store, "k")
    assert (record.limits, record.override, record.pending) == (Limits(max_running=1), True, 4)


def test_limit_set_re_times_an_existing_front(store: Store) -> None:
    store.limit_set_default("q", Limits(min_interval=100), now=T0)
    jobs = keyed(store, "k", 3)
    assert ids(claim(store, limit=10, now=T0)) == [jobs[0]]
    assert key_limit(store, "k").next_start == T0 + 100
    assert store.job_next_due(["q"]) == T0 + 100
    store.limit_set("k", Limits(min_interval=10), now=T0 + 1)
    record = key_limit(store, "k", now=T0 + 1)
    assert (record.limits, record.override, record.next_start) == (
        Limits(min_interval=10),
        True,
        T0 + 10,
    )
    assert store.job_next_due(["q"]) == T0 + 10
    assert claim(store, limit=10, now=T0 + 9) == []
    assert ids(claim(store, limit=10, now=T0 + 10)) == [jobs[1]]
    # a longer interval pushes the new front out
    store.limit_set("k", Limits(min_interval=50), now=T0 + 11)
    assert claim(store, limit=10, now=T0 + 59) == []
    assert ids(claim(store, limit=10, now=T0 + 60)) == [jobs[2]]


def test_limit_set_to_the_running_count_stops_the_front(store: Store) -> None:
    jobs = keyed(store, "k", 3)
    store.limit_set("k", Limits(max_running=2), now=T0)
    assert ids(claim(store, limit=1)) == [jobs[0]]
    store.limit_set("k", Limits(max_running=1), now=T0)
    assert key_limit(store, "k").next_start is None
    assert claim(store, limit=10) == []
    assert [get(store, j).state for j in jobs[1:]] == [JobState.PENDING] * 2
    store.limit_set("k", Limits(max_running=3), now=T0 + 1)
    assert ids(claim(store, limit=10, now=T0 + 1)) == jobs[1:]


def test_limit_set_does_not_touch_blocked_until(store: Store) -> None:
    [job] = keyed(store, "k", 1)
    store.limit_block("k", T0 + 40, now=T0)
    store.limit_set("k", Limits(max_running=1), now=T0)
    assert key_limit(store, "k").blocked_until == T0 + 40
    assert claim(store, limit=10, now=T0 + 39) == []
    assert ids(claim(store, limit=10, now=T0 + 40)) == [job]


# -- introspection ---------------------------------------------------------------------------


def test_limit_get_reports_the_state_of_each_key(store: Store) -> None:
    store.limit_set("a", Limits(max_running=2, min_interval=5), now=T0)
    keyed(store, "a", 3)
    assert len(claim(store, ["q"], limit=10, now=T0)) == 1
    add(store, queue="b", limit_key="b", delay=7)
    store.limit_block("c", T0 + 30, now=T0)
    assert store.limit_get(["a", "missing", "b", "c"], now=T0) == [
        KeyLimit(
            key="a",
            limits=Limits(max_running=2, min_interval=5),
            override=True,
            blocked_until=None,
            running=1,
            last_start=T0,
            pending=2,
            next_start=T0 + 5,
        ),
        None,
        KeyLimit(
            key="b",
            limits=Limits(),
            override=False,
            blocked_until=None,
            running=0,
            last_start=None,
            pending=1,
            next_start=T0 + 7,
        ),
        KeyLimit(
            key="c",
            limits=Limits(),
            override=False,
            blocked_until=T0 + 30,
            running=0,
            last_start=None,
            pending=0,
            next_start=None,
        ),
    ]
    assert store.limit_get([], now=T0) == []


def test_limit_get_of_a_key_at_its_cap_or_held_has_no_next_start(store: Store) -> None:
    store.limit_set("capped", Limits(max_running=1), now=T0)
    keyed(store, "capped", 2)
    claim_one(store)
    capped = key_limit(store, "capped")
    assert (capped.running, capped.pending, capped.next_start) == (1, 1, None)
    c = new_crawl(store, spec(limit_key="held"), spec(limit_key="held"))
    assert store.crawl_pause(c.id, now=T0)
    held = key_limit(store, "held")
    assert (held.running, held.pending, held.next_start) == (0, 2, None)


def test_limit_list_pages_through_keys_in_order(store: Store) -> None:
    for key in ("d", "b", "a", "c"):
        add(store, limit_key=key)
    store.limit_set("e", Limits(max_running=1), now=T0)
    everything = store.limit_list()
    assert [k.key for k in everything] == ["a", "b", "c", "d", "e"]
    assert everything == store.limit_get(["a", "b", "c", "d", "e"], now=T0)
    assert [k.key for k in store.limit_list(limit=2)] == ["a", "b"]
    assert [k.key for k in store.limit_list(limit=2, after="b")] == ["c", "d"]
    assert [k.key for k in store.limit_list(after="bb")] == ["c", "d", "e"]
    assert store.limit_list(after="e") == []


def test_an_empty_store_lists_no_keys(store: Store) -> None:
    assert store.limit_list() == []
    assert store.limit_get(["x"], now=T0) == [None]


def test_jobs_of_a_blocked_key_are_pending_and_counted_waiting(store: Store) -> None:
    store.limit_block("k", T0 + 100, now=T0)
    jobs = keyed(store, "k", 3)
    assert [get(store, j).state for j in jobs] == [JobState.PENDING] * 3
    assert ids(store.job_list(JobFilter(state=JobState.PENDING))) == jobs
    s = stats_by_queue(store, T0)["q"]
    assert (s.due, s.scheduled, s.waiting, s.held, s.pending) == (0, 1, 2, 0, 3)
    assert store.job_next_due(["q"]) == T0 + 100


def test_stats_count_waiting_jobs_of_a_capped_key(store: Store) -> None:
    store.limit_set("k", Limits(max_running=1), now=T0)
    keyed(store, "k", 4)
    claim_one(store)
    s = stats_by_queue(store, T0)["q"]
    assert (s.due, s.scheduled, s.running, s.waiting, s.pending) == (0, 0, 1, 3, 3)


def test_the_next_front_of_a_crawls_capped_key_counts_due_once_the_last_job_ends(
    store: Store,
) -> None:
    store.limit_set("k", Limits(max_running=1), now=T0)
    c = new_crawl(store, *(spec(limit_key="k", args=[i]) for i in range(3)))
    job = claim_one(store)
    assert complete(store, job.lease, now=T0 + 1)
    s = stats_by_queue(store, T0 + 1)["q"]
    assert (s.due, s.scheduled, s.running, s.waiting, s.pending) == (1, 0, 0, 1, 2)
    assert crawl_counts(store, c.id) == (2, 0, 1, 0, 0)
    assert claim_one(store, now=T0 + 1).args == [1]


def test_job_next_due_reflects_a_fronts_gated_time(store: Store) -> None:
    store.limit_set("k", Limits(min_interval=30), now=T0)
    keyed(store, "k", 2)
    assert store.job_next_due(["q"]) == T0
    claim_one(store, now=T0)
    assert store.job_next_due(["q"]) == T0 + 30
    store.limit_block("k", T0 + 50, now=T0 + 1)
    assert store.job_next_due(["q"]) == T0 + 50
    later = add(store, delay=40, now=T0 + 1)
    assert store.job_next_due(["q"]) == T0 + 41
    assert get(store, later).run_at == T0 + 41


def test_job_next_gated_finds_the_jobs_only_a_limit_key_keeps_back(store: Store) -> None:
    store.limit_set("k", Limits(min_interval=30), now=T0)
    keyed(store, "k", 2)
    add(store, delay=5)  # due later by its own run_at: never counted
    add(store, queue="free", limit_key="f", delay=10)  # the same, with a free key
    assert store.job_next_gated(["q", "free"], within=60, now=T0) is None, "k's front is due"
    claim_one(store, now=T0)
    assert store.job_next_gated(["q", "free"], within=60, now=T0 + 1) == T0 + 30
    assert store.job_next_gated(["q"], within=20, now=T0 + 1) is None, "past the window"
    assert store.job_next_gated(["free", "none"], within=60, now=T0 + 1) is None
    store.limit_block("k", T0 + 50, now=T0 + 1)  # a short block
    assert store.job_next_gated(["q"], within=60, now=T0 + 1) == T0 + 50
    store.limit_block("k", T0 + 5000, now=T0 + 2)  # a long one
    assert store.job_next_gated(["q"], within=60, now=T0 + 2) is None


def test_job_next_gated_counts_a_job_from_its_own_run_at(store: Store) -> None:
    store.limit_set("k", Limits(min_interval=30), now=T0)
    add(store, queue="g", limit_key="k")
    claim_one(store, ["g"], now=T0)
    add(store, queue="g", limit_key="k", delay=20, now=T0)  # own run_at T0+20, gate T0+30
    add(store, queue="h", limit_key="k2", delay=40, now=T0)  # no gate at all
    assert store.job_next_gated(["g", "h"], within=60, now=T0 + 1) is None
    assert store.job_next_gated(["g", "h"], within=60, now=T0 + 20) == T0 + 30
    assert store.job_next_gated(["g"], within=60, now=T0 + 1) is None


# -- many keys -------------------------------------------------------------------------------


def test_a_claim_among_many_blocked_keys_takes_only_allowed_jobs(store: Store) -> None:
    keys = [f"host-{i:03d}" for i in range(200)]
    free = "host-100"
    for key in keys[:100]:  # blocked before their jobs arrive
        if key != free:
            store.limit_block(key, T0 + 1000, now=T0)
    store.limit_set(free, Limits(max_running=2), now=T0)
    schedule(store, *(spec(limit_key=key, args=[i]) for key in keys for i in range(5)), now=T0)
    for key in keys[100:]:  # blocked after their jobs arrived
        if key != free:
            store.limit_block(key, T0 + 1000, now=T0)
    claimed = claim(store, limit=10, now=T0 + 1)
    assert [(j.limit_key, j.args) for j in claimed] == [(free, [0]), (free, [1])]
    assert claim(store, limit=10, now=T0 + 999) == []
    s = stats_by_queue(store, T0 + 1)["q"]
    assert (s.running, s.pending, s.waiting) == (2, 998, 199 * 4 + 3)
    late = claim(store, limit=1000, now=T0 + 1000)
    assert len(late) == 199 * 5
    assert {j.limit_key for j in late} == set(keys) - {free}


# -- pruning -----------------------------------------------------------------------------------


def test_prune_removes_idle_key_records_and_keeps_overrides(store: Store) -> None:
    store.limit_set("override", Limits(max_running=1), now=T0)
    for key in ("idle", "override", "blocked", "busy", "spaced"):
        add(store, limit_key=key)
    store.limit_set_default("q2", Limits(min_interval=100), now=T0)
    add(store, queue="q2", limit_key="spaced2")
    for job in claim(store, ["q", "q2"], limit=10, now=T0):
        if job.limit_key != "busy":
            assert complete(store, job.lease, now=T0)
    add(store, limit_key="busy", delay=10**6)  # busy also has a pending job
    store.limit_block("blocked", T0 + 500, now=T0)
    store.job_prune(retention=0, now=T0 + 1)
    names = ["idle", "override", "blocked", "busy", "spaced", "spaced2"]
    records = store.limit_get(names, now=T0 + 1)
    present = {name: r is not None for name, r in zip(names, records, strict=True)}
    assert present == {
        "idle": False,
        "override": True,
        "blocked": True,
        "busy": True,
        "spaced": False,
        "spaced2": True,
    }
    store.job_prune(retention=0, now=T0 + 1000)
    remaining = [r.key for r in store.limit_list()]
    assert remaining == ["busy", "override"]
    record = key_limit(store, "override", now=T0 + 1000)
    assert (record.limits, record.override, record.running, record.pending) == (
        Limits(max_running=1),
        True,
        0,
        0,
    )


def test_a_pruned_key_takes_settings_anew(store: Store) -> None:
    store.limit_set_default("q", Limits(max_running=1), now=T0)
    add(store, limit_key="k")
    assert complete(store, claim_one(store).lease, now=T0)
    store.limit_set_default("q", Limits(max_running=2), now=T0)
    store.job_prune(retention=0, now=T0 + 1)
    assert store.limit_get(["k"], now=T0 + 1) == [None]
    keyed(store, "k", 3, now=T0 + 1)
    assert key_limit(store, "k", now=T0 + 1).limits == Limits(max_running=2)
    assert len(claim(store, limit=10, now=T0 + 1)) == 2


# -- concurrency -------------------------------------------------------------------------------


def test_max_running_holds_under_concurrent_claimers(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    """Real time here: four store objects claim and complete 100 jobs of one key."""
    store.limit_set("k", Limits(max_running=2))
    expected = set(keyed(store, "k", 100, now=store.now()))
    stores = [store, *(open_same_store() for _ in range(3))]
    lock = threading.Lock()
    running = 0
    most = 0
    claimed: list[JobId] = []
    store_counts: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(stores))
    deadline = time.monotonic() + 120  # a guard against a hang, not a timing assert

    def work(index: int) -> None:
        nonlocal running, most
        s = stores[index]
        try:
            barrier.wait()
            while True:
                with lock:
                    if len(claimed) >= len(expected):
                        return
                if time.monotonic() > deadline:
                    raise AssertionError("the jobs were not all claimed in time")
                jobs = s.job_claim(ClaimParams(queues=["q"], worker_id=f"w{index}", limit=2))
                if not jobs:
                    continue
                with lock:
                    running += len(jobs)
                    most = max(most, running)
                    claimed.extend(j.id for j in jobs)
                [record] = s.limit_get(["k"])
                assert record is not None
                with lock:
                    store_counts.append(record.running)
                with lock:
                    running -= len(jobs)
                leases = [Completion(lease=j.lease) for j in jobs]
                assert s.job_complete(leases) == [True] * len(jobs)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(claimed) == sorted(expected), "each job claimed exactly once"
    assert most <= 2, f"{most} jobs of the key ran at once"
    assert store_counts and max(store_counts) <= 2
    assert all(j.state is JobState.DONE for j in all_jobs(store))
    record = key_limit(store, "k", now=store.now())
    assert (record.running, record.pending) == (0, 0)


def test_a_conflict_never_moves_a_job_to_another_limit_key(store: Store) -> None:
    store.limit_set("a", Limits(max_running=1), now=T0)
    job_id = add(store, key="page", limit_key="a", args=["old"])
    [result] = schedule(store, spec(key="page", limit_key="b", args=["new"]), now=T0 + 1)
    assert result == (job_id, Outcome.UPDATED)
    assert (get(store, job_id).args, get(store, job_id).limit_key) == (["new"], "a")
    assert key_limit(store, "a", now=T0 + 1).pending == 1
    [b] = store.limit_get(["b"], now=T0 + 1)
    assert b is None or (b.pending, b.running) == (0, 0)


def test_cancelling_a_keys_front_hands_the_key_to_the_next_job(store: Store) -> None:
    store.limit_set("k", Limits(max_running=1), now=T0)
    jobs = keyed(store, "k", 3, delay=10)
    assert key_limit(store, "k").next_start == T0 + 10
    assert store.job_cancel([jobs[0]], now=T0 + 1) == [jobs[0]]
    record = key_limit(store, "k", now=T0 + 1)
    assert (record.pending, record.next_start) == (2, T0 + 10)
    assert ids(claim(store, limit=10, now=T0 + 10)) == [jobs[1]]
    assert store.job_cancel([jobs[2]], now=T0 + 11) == [jobs[2]]
    assert key_limit(store, "k", now=T0 + 11).pending == 0
