"""What only the SQLite store has to prove: its query plans, locking and file handling."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import crawlq
from crawlq.jobs import JobSpec
from crawlq.stores.base import ClaimParams
from crawlq.stores.sqlite.store import Q, SQLiteSettings, SQLiteStore


def plan(conn: sqlite3.Connection, query: str, params: dict[str, object]) -> str:
    rows = conn.execute(f"EXPLAIN QUERY PLAN {query}", params).fetchall()
    return "\n".join(str(row[3]) for row in rows)


@pytest.fixture
def db(tmp_path: Path) -> sqlite3.Connection:
    SQLiteStore(SQLiteSettings(path=str(tmp_path / "jobs.db"))).close()
    return sqlite3.connect(tmp_path / "jobs.db")


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
    sweep = plan(db, Q["job_expire_leases"], {"now": 0.0})
    assert "crawlq_jobs_lease (lease_expires_at<?)" in sweep


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


def test_driver_errors_are_wrapped(tmp_path: Path) -> None:
    path = tmp_path / "not-a-db.db"
    path.write_bytes(b"this is not an SQLite file" * 100)
    with pytest.raises(crawlq.StoreError, match="SQLite failed") as err:
        SQLiteStore(SQLiteSettings(path=str(path)))
    assert isinstance(err.value.__cause__, sqlite3.DatabaseError)


def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(crawlq.StoreError, match="unable to open"):
        crawlq.open_store(f"sqlite:///{tmp_path / 'nowhere' / 'jobs.db'}")


def test_url_options_reach_the_settings(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'j.db'}?synchronous=full&busy_timeout=5&poll_interval=0.01"
    store = crawlq.open_store(url)
    assert isinstance(store, SQLiteStore)
    assert store.settings == SQLiteSettings(
        path=str(tmp_path / "j.db"), synchronous="full", busy_timeout=5.0, poll_interval=0.01
    )
    store.close()
