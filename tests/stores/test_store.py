"""The store object itself: the protocol, its clock and closing."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from store_helpers import STORE_FACTORIES, add

from crawlq.stores import gate
from crawlq.stores.base import Capabilities, JobFilter, Store


def test_the_store_keeps_the_protocol(store: Store) -> None:
    assert isinstance(store, Store)
    assert isinstance(store.capabilities, Capabilities)


def test_the_store_clock_is_close_to_this_host_clock(store: Store) -> None:
    assert abs(store.now() - time.time()) < 5.0
    first = store.now()
    assert store.now() >= first


def test_a_second_store_object_sees_the_same_jobs(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    job_id = add(store)
    other: Store = open_same_store()
    assert [j.id for j in other.job_list(JobFilter())] == [job_id]


def test_closing_keeps_what_was_stored(store_name: str, tmp_path: Path) -> None:
    """``close`` releases connections; the jobs stay for the next Store object.

    (Using a store after ``close`` is the caller's mistake: the protocol does not say what
    happens then, so this suite does not test it.)
    """
    directory = tmp_path / "closed"
    directory.mkdir()
    first = STORE_FACTORIES[store_name](directory)
    job_id = add(first, key="k", args=[1])
    first.close()
    reopened = STORE_FACTORIES[store_name](directory)
    try:
        [job] = reopened.job_list(JobFilter())
        assert (job.id, job.key, job.args) == (job_id, "k", [1])
    finally:
        reopened.close()


def test_every_checked_call_goes_through_the_gate(store: Store) -> None:
    """A store's calls that take something to check are the gate's own (crawlq.stores.gate),
    not redefined by the store: so every store checks the same values alike."""
    parts = [gate.JobGate, gate.WorkerGate, gate.CrawlGate, gate.StorageGate]
    assert all(isinstance(store, part) for part in parts)
    for part in parts:
        for name, call in vars(part).items():
            if not name.startswith("_") and callable(call):
                assert getattr(type(store), name) is call, f"{type(store).__name__}.{name}"
