"""What only the SQLite store has to prove: its query plans, locking and file handling."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import crawlq
from crawlq.crawls import CrawlSpec, CrawlState
from crawlq.jobs import Job, JobSpec, Outcome
from crawlq.stores.base import ClaimParams, Completion, Failure, JobFilter
from crawlq.stores.sqlite.store import Q, SQLiteSettings, SQLiteStore, add_functions
from crawlq.stores.states import LEASE_EXPIRED


def plan(conn: sqlite3.Connection, query: str, params: dict[str, object]) -> str:
    rows = conn.execute(f"EXPLAIN QUERY PLAN {query}", params).fetchall()
    return "\n".join(str(row[3]) for row in rows)


@pytest.fixture
def db(tmp_path: Path) -> sqlite3.Connection:
    SQLiteStore(SQLiteSettings(path=str(tmp_path / "jobs.db"))).close()
    conn = sqlite3.connect(tmp_path / "jobs.db")
    add_functions(conn)  # the queries call crawlq_pending_state
    return conn


def test_claim_reads_the_claim_index_in_order(db: sqlite3.Connection) -> None:
    text = plan(db, Q["job_claim_candidates"], {"queue": "q", "now": 0.0, "limit": 10})
    assert "USING INDEX crawlq_jobs_claim (queue=?)" in text
    assert "TEMP B-TREE" not in text  # no sort: the index order is the claim order


def test_promotion_and_next_due_are_index_range_reads(db: sqlite3.Connection) -> None:
    promote = plan(db, Q["job_promote_due"], {"queue": "q", "now": 0.0})
    assert "crawlq_jobs_scheduled (queue=? AND run_at<?)" in promote
    due = plan(db, Q["job_has_due"], {"queue": "q", "now": 0.0})
    assert "crawlq_jobs_scheduled (queue=? AND run_at<?)" in due and "SCAN crawlq_jobs" not in due
    unpromoted = plan(db, Q["queue_due_unpromoted"], {"queue": "q", "now": 0.0})
    assert "crawlq_jobs_scheduled (queue=? AND run_at<?)" in unpromoted
    for state in ("ready", "scheduled"):
        first = plan(db, Q[f"queue_min_run_at_{state}"], {"queue": "q"})
        assert f"crawlq_jobs_{state} (queue=?)" in first and "SCAN" not in first


def test_claim_by_ids_and_lease_sweep_use_indexes(db: sqlite3.Connection) -> None:
    claim = plan(db, Q["job_claim_ids"], {"ids": "[1]", "worker_id": "w", "now": 0.0})
    assert "INTEGER PRIMARY KEY" in claim
    sweep = plan(db, Q["job_expire_leases"], {**LEASE_EXPIRED, "now": 0.0})
    assert "crawlq_jobs_lease (lease_expires_at<?)" in sweep
    live = plan(db, Q["job_key_holders"], {"pairs": '[["q", "a"], ["q", "b"]]'})
    assert "SEARCH crawlq_jobs USING INDEX crawlq_jobs_key (queue=? AND key=?)" in live
    by_key = plan(db, Q["job_get_live_by_key"], {"queue": "q", "key": "a"})
    assert "USING INDEX crawlq_jobs_key (queue=? AND key=?)" in by_key
    requeue = plan(db, Q["job_requeue"], {"id": 1, "now": 0.0})
    assert "SEARCH holder USING INDEX crawlq_jobs_key (queue=? AND key=?)" in requeue
    release = plan(db, Q["job_release_ended_keys"], {"pairs": '[["q", "a"]]', "now": 0.0})
    assert "USING INDEX crawlq_jobs_key (queue=? AND key=?)" in release
    assert "SCAN crawlq_jobs" not in live


def test_a_write_lock_held_too_long_becomes_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    store = SQLiteStore(SQLiteSettings(path=str(path), busy_timeout=0.2))
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    with pytest.raises(crawlq.StoreUnavailable, match="locked") as err:
        store.job_schedule([JobSpec(queue="q", task="t")])
    assert isinstance(err.value.__cause__, sqlite3.OperationalError)
    blocker.execute("ROLLBACK")
    assert store.job_schedule([JobSpec(queue="q", task="t")])[0].job_id >= 1
    store.close()


def test_another_process_waits_for_the_lock_instead_of_failing(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "jobs.db"
    store = SQLiteStore(SQLiteSettings(path=str(path)))
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    threading.Timer(0.3, lambda: blocker.execute("ROLLBACK")).start()
    [result] = store.job_schedule([JobSpec(queue="q", task="t")])
    assert result.outcome is crawlq.Outcome.CREATED
    assert store.job_claim(ClaimParams(queues=["q"], worker_id="w"))[0].id == result.job_id
    store.close()


def _open_at_once(path: str, barrier: Any, errors: Any) -> None:
    barrier.wait()
    try:
        SQLiteStore(SQLiteSettings(path=path)).close()
    except Exception as exc:
        errors.put(repr(exc))


def test_processes_opening_a_new_file_at_the_same_moment_all_open_it(tmp_path: Path) -> None:
    # their switches to WAL collide, and SQLite fails them at once, busy handler or not
    # (two `scrapy crawl` processes started together on a new file: one exited with 1)
    context = multiprocessing.get_context("fork")
    errors = context.Queue()
    for round_ in range(30):
        barrier = context.Barrier(3)
        path = str(tmp_path / f"jobs-{round_}.db")
        openers = [
            context.Process(target=_open_at_once, args=(path, barrier, errors)) for _ in range(3)
        ]
        for opener in openers:
            opener.start()
        for opener in openers:
            opener.join(60)
        assert [o.exitcode for o in openers] == [0, 0, 0]
    assert errors.empty(), errors.get()


def test_a_file_that_is_not_a_database_is_named(tmp_path: Path) -> None:
    path = tmp_path / "not-a-db.db"
    path.write_bytes(b"this is not an SQLite file" * 100)
    with pytest.raises(crawlq.ConfigurationError) as err:
        SQLiteStore(SQLiteSettings(path=str(path)))
    assert str(err.value) == f"cannot open the SQLite store {path}: file is not a database"
    assert isinstance(err.value.__cause__, sqlite3.DatabaseError)


def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(crawlq.ConfigurationError) as err:
        crawlq.open_store(f"sqlite:///{tmp_path / 'nowhere' / 'jobs.db'}")
    assert str(err.value) == (
        f"cannot open the SQLite store {tmp_path / 'nowhere' / 'jobs.db'}: its directory "
        f"{tmp_path / 'nowhere'} does not exist; create it, or give another path"
    )
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may open any file")
def test_a_file_without_permission_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    crawlq.open_store(f"sqlite:///{folder / 'jobs.db'}").close()
    folder.chmod(0o500)
    try:
        with pytest.raises(crawlq.ConfigurationError, match=f"{folder / 'jobs.db'}: no permission"):
            crawlq.open_store(f"sqlite:///{folder / 'jobs.db'}")
    finally:
        folder.chmod(0o700)


def test_url_options_reach_the_settings(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'j.db'}?synchronous=full&busy_timeout=5&poll_interval=0.01"
    store = crawlq.open_store(url)
    assert isinstance(store, SQLiteStore)
    assert store.settings == SQLiteSettings(
        path=str(tmp_path / "j.db"), synchronous="full", busy_timeout=5.0, poll_interval=0.01
    )
    store.close()


# -- crawls, seen sets and limit keys (issue 6) ---------------------------------------------

T0 = 1_000_000.0


def test_limit_and_crawl_statements_read_their_partial_indexes(db: sqlite3.Connection) -> None:
    front = plan(db, Q["limit_take_fronts"], {"keys": '["k"]'})
    assert "crawlq_jobs_waiting (limit_key=?)" in front and "TEMP B-TREE" not in front
    for query in ("crawl_hold_jobs", "crawl_unhold_jobs", "crawl_cancel_jobs"):
        text = plan(db, Q[query], {"id": 1, "now": 0.0})
        assert "USING INDEX crawlq_jobs_crawl (crawl_id=?)" in text, (query, text)
    seen = plan(db, Q["seen_insert"], {"crawl_id": 1, "fp": b"x" * 16})
    assert "SCAN" not in seen


def _vm_steps(store: SQLiteStore, call: Callable[[], object]) -> int:
    """SQLite virtual machine instructions ``call`` runs: a cost measure free of timing."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    store._conn.set_progress_handler(count, 1)
    try:
        call()
    finally:
        store._conn.set_progress_handler(None, 1)
    return steps


def _claim_cost(tmp_path: Path, name: str, waiting_per_key: int) -> tuple[int, list[int]]:
    """The cost of claiming 5 of 20 free jobs with 1,000 blocked keys each holding
    ``waiting_per_key`` jobs behind their front (scheduled at the block's end)."""
    store = SQLiteStore(SQLiteSettings(path=str(tmp_path / name)))
    try:
        keys = [f"host-{i:04d}" for i in range(1000)]
        for key in keys:
            store.limit_block(key, T0 + 3600, now=T0)
        fronts = [JobSpec(queue="q", task="t", limit_key=k, priority=9) for k in keys]
        store.job_schedule(fronts, now=T0)
        with closing(sqlite3.connect(tmp_path / name)) as raw, raw:  # the waiting jobs, fast
            raw.execute(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
                "INSERT INTO crawlq_jobs (queue, task, args, kwargs, priority, run_at, state, "
                "max_attempts, lease_seconds, created_at, limit_key) "
                "SELECT 'q', 't', '[]', '{}', 9, ?, 'waiting', 3, 30, ?, key "
                "FROM n, crawlq_limits WHERE ? > 0",
                (waiting_per_key, T0, T0, waiting_per_key),
            )
        store.job_schedule([JobSpec(queue="q", task="t", args=[i]) for i in range(20)], now=T0)
        claimed: list[int] = []

        def claim() -> None:
            jobs = store.job_claim(ClaimParams(queues=["q"], worker_id="w", limit=5, now=T0 + 1))
            claimed.extend(j.args[0] for j in jobs)  # type: ignore[misc]

        steps = _vm_steps(store, claim)
        [stats] = store.queue_stats(now=T0 + 1)
        assert stats.waiting == 1000 * waiting_per_key and stats.scheduled == 1000
        return steps, claimed
    finally:
        store.close()


def test_a_claim_costs_the_same_behind_100_000_waiting_jobs_of_blocked_keys(
    tmp_path: Path,
) -> None:
    none_steps, none_claimed = _claim_cost(tmp_path, "none.db", 0)
    deep_steps, deep_claimed = _claim_cost(tmp_path, "deep.db", 100)
    assert none_claimed == deep_claimed == [0, 1, 2, 3, 4]
    # The same statements on the same index paths: only B-tree depth may differ.
    assert deep_steps <= none_steps * 1.2, (none_steps, deep_steps)


def _traced(store: SQLiteStore, call: Callable[[], object]) -> list[str]:
    """The statements ``call`` executes (the trace repeats a statement for each trigger
    step it runs: repeats are folded)."""
    statements: list[str] = []

    def trace(sql: str) -> None:
        if not statements or statements[-1] != sql:
            statements.append(sql)

    store._conn.set_trace_callback(trace)
    try:
        call()
    finally:
        store._conn.set_trace_callback(None)
    return statements


def test_jobs_outside_crawls_and_limit_keys_run_no_extra_statement(tmp_path: Path) -> None:
    store = SQLiteStore(SQLiteSettings(path=str(tmp_path / "jobs.db")))
    try:
        schedule = _traced(store, lambda: store.job_schedule([JobSpec(queue="q", task="t")]))
        assert len(schedule) == 3  # BEGIN, the insert, COMMIT
        jobs: list[Job] = []
        claim = _traced(
            store,
            lambda: jobs.extend(store.job_claim(ClaimParams(queues=["q"], worker_id="w"))),
        )
        expected = ["job_has_due", "BEGIN IMMEDIATE", "job_promote_due"]
        expected += ["job_claim_candidates", "job_claim_ids_one", "COMMIT"]
        assert [s.splitlines()[0] for s in claim] == [
            Q.get(name, name).splitlines()[0] for name in expected
        ]
        done = _traced(store, lambda: store.job_complete([Completion(lease=jobs[0].lease)]))
        assert len(done) == 3  # BEGIN, the update, COMMIT
        text = "\n".join(schedule + claim + done)
        assert "crawlq_crawls" not in text and "crawlq_limits" not in text
    finally:
        store.close()


def test_fronts_keep_their_own_run_at_aside_while_gated(tmp_path: Path) -> None:
    store = SQLiteStore(SQLiteSettings(path=str(tmp_path / "jobs.db")))
    try:
        store.limit_block("k", T0 + 50, now=T0)
        [first] = store.job_schedule([JobSpec(queue="q", task="t", limit_key="k")], now=T0)
        row = store._conn.execute(
            "SELECT state, run_at, own_run_at FROM crawlq_jobs WHERE id = ?", (first.job_id,)
        ).fetchone()
        assert tuple(row) == ("scheduled", T0 + 50, T0)
        crawl = store.crawl_create(CrawlSpec(name="c"), [], now=T0)
        assert crawl.state is CrawlState.FINISHED  # nothing to do: finished at once
        store.job_cancel([first.job_id], now=T0 + 1)
        row = store._conn.execute(
            "SELECT state, run_at, own_run_at FROM crawlq_jobs WHERE id = ?", (first.job_id,)
        ).fetchone()
        assert tuple(row) == ("cancelled", T0, None)
        [key] = store.limit_get(["k"])
        assert key is not None and (key.pending, key.next_start) == (0, None)
    finally:
        store.close()


def test_a_page_s_links_take_two_statements_however_many_they_are(tmp_path: Path) -> None:
    """The children of a completion that have no unique key (a crawler page's links) go
    in with one seen-set insert and one job insert per 64 of them, not two statements
    each: the cost of a page is its link count in SQLite's own steps, not in calls."""
    store = SQLiteStore(SQLiteSettings(path=str(tmp_path / "jobs.db")))
    try:
        page = JobSpec(queue="q", task="page", limit_key="h", fingerprint=bytes(16))
        crawl = store.crawl_create(CrawlSpec(name="c"), [page], now=T0)

        def links(count: int, first: int) -> list[JobSpec]:
            return [
                JobSpec(
                    queue="q",
                    task="page",
                    args=[i],
                    crawl=crawl.id,
                    limit_key="h",
                    fingerprint=(i % 30).to_bytes(16, "big"),  # repeats once past 30
                )
                for i in range(first, first + count)
            ]

        def end_page(kids: list[JobSpec], now: float) -> list[str]:
            [job] = store.job_claim(ClaimParams(queues=["q"], worker_id="w", now=now))
            done = Completion(lease=job.lease, children=kids)
            return _traced(store, lambda: store.job_complete([done], now=now))

        few, many = end_page(links(10, 1), T0 + 1), end_page(links(50, 11), T0 + 2)
        inserts = [s for s in few + many if s.lstrip().startswith(("INSERT", "--"))]
        seen = [s for s in inserts if "INTO crawlq_seen" in s]
        jobs = [s for s in inserts if "INTO crawlq_jobs" in s]
        assert (len(seen), len(jobs)) == (2, 2), inserts
        # BEGIN, the update, the crawl, the two inserts, the key, reconcile (one or two
        # steps), the crawl's finish and COMMIT, for 10 links as for 50
        assert len(few) <= 10 and len(many) <= 10, (few, many)
        assert crawl.id is not None and store.crawl_get(crawl.id).seen == 30  # type: ignore[union-attr]
    finally:
        store.close()


def test_a_child_whose_fingerprint_the_store_scheduled_is_not_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child whose (crawl, fingerprint) this store object has scheduled is left out of
    its completion without a statement (the gate's seen memo: a seen set only grows). A
    write that fails teaches the memo nothing, since its inserts are undone."""
    store = SQLiteStore(SQLiteSettings(path=str(tmp_path / "jobs.db")))
    try:
        pages = [JobSpec(queue="q", task="page", args=[i]) for i in range(4)]
        crawl = store.crawl_create(CrawlSpec(name="c"), pages, now=T0)

        def link(i: int) -> JobSpec:
            fp = i.to_bytes(16, "big")
            return JobSpec(queue="kids", task="page", args=[i], crawl=crawl.id, fingerprint=fp)

        def asked(children: list[JobSpec]) -> list[str]:
            """The seen-set statements of a page's completion with ``children``."""
            [job] = store.job_claim(ClaimParams(queues=["q"], worker_id="w", limit=1, now=T0))
            done = Completion(lease=job.lease, children=children)
            trace = _traced(store, lambda: store.job_complete([done], now=T0))
            return [s for s in trace if "INTO crawlq_seen" in s]

        assert len(asked([link(1), link(2)])) == 1
        again = asked([link(1), link(2), link(3)])
        assert len(again) == 1 and again[0].lower().count("x'") == 1, again  # link 3 alone
        assert asked([link(3)]) == []

        def fail(*args: object, **kwargs: object) -> None:
            raise sqlite3.OperationalError("disk I/O error")

        monkeypatch.setattr(store, "_insert", fail)  # after link 4's seen insert
        with pytest.raises(crawlq.StoreError):
            asked([link(4)])
        monkeypatch.undo()
        assert not store.seen_known(crawl.id, (4).to_bytes(16, "big"))
        assert [j.args for j in store.job_list(JobFilter(queue="kids"))] == [[1], [2], [3]]
    finally:
        store.close()


def _index_pages(path: Path, index: str) -> dict[int, bytes]:
    """The pages of ``index`` in the database file, after a checkpoint (dbstat: which
    pages; the file: their bytes)."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        try:
            found = conn.execute("SELECT pageno FROM dbstat WHERE name = ?", (index,))
        except sqlite3.OperationalError:
            pytest.skip("this SQLite is built without the dbstat table")
        numbers = [n for (n,) in found]
    data = path.read_bytes()
    return {n: data[(n - 1) * size : n * size] for n in numbers}


def test_a_keyed_job_s_own_life_leaves_the_key_index_unwritten(tmp_path: Path) -> None:
    """The key index holds the jobs that hold their keys (migration 0009): a keyed job's
    entry is written when it is inserted, and its promotion, claim, retry and end write
    no page of it; a later job taking the key of an ended one does."""
    path = tmp_path / "jobs.db"
    store = SQLiteStore(SQLiteSettings(path=str(path)))
    try:
        keys = [f"https://host{i % 7}.test/page/{i}" for i in range(400)]
        store.job_schedule([JobSpec(queue="q", task="t", key=k, delay=10) for k in keys], now=T0)
        before = _index_pages(path, "crawlq_jobs_key")
        assert len(before) > 3  # keys spread over several leaves
        claimed: list[Job] = []
        params = ClaimParams(queues=["q"], worker_id="w", limit=50, now=T0 + 11)
        while batch := store.job_claim(params):
            claimed.extend(batch)  # the first claim promotes the jobs that became due
        assert len(claimed) == len(keys)
        retry = [Failure(lease=j.lease, error="boom", retry_delay=5.0) for j in claimed[:100]]
        assert store.job_fail(retry, now=T0 + 12) == [True] * 100
        done = [Completion(lease=j.lease) for j in claimed[100:]]
        assert store.job_complete(done, now=T0 + 13) == [True] * 300
        assert _index_pages(path, "crawlq_jobs_key") == before
        again = store.job_schedule([JobSpec(queue="q", task="t", key=k) for k in keys], now=T0 + 14)
        created = [r.outcome is Outcome.CREATED for r in again]
        assert created == [False] * 100 + [True] * 300  # the retried ones are still live
        assert _index_pages(path, "crawlq_jobs_key") != before  # new holders for 300 keys
        holders = store._conn.execute(
            "SELECT count(*) FROM crawlq_jobs WHERE key_released IS NULL"
        ).fetchone()[0]
        assert holders == len(keys)
    finally:
        store.close()
