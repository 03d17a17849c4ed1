"""SQLite schema migrations: the schema a store reaches equals the one its migration files
describe, from any earlier version; migrating is idempotent, refuses a newer schema, and
is safe when several processes open a new file at once."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import closing
from importlib import resources
from pathlib import Path

import pytest

from crawlq.exceptions import ConfigurationError
from crawlq.jobs import JobSpec, WorkerInfo
from crawlq.stores import open_store
from crawlq.stores._sqlfile import load_queries, split_statements
from crawlq.stores.base import JobFilter, Store
from crawlq.stores.sqlite.store import SQLiteStore

Schema = list[tuple[str, str, str, str]]


def migration_files() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every shipped migration, in version order."""
    folder = resources.files("crawlq.stores.sqlite.migrations")
    found = [
        (int(f.name.split("_", 1)[0]), f.name, f.read_text(encoding="utf-8"))
        for f in folder.iterdir()
        if f.name.endswith(".sql")
    ]
    return sorted(found)


def migrate_by_hand(conn: sqlite3.Connection, done: int) -> None:
    """Apply the first ``done`` migration files and record them, as an older crawlq did."""
    conn.execute(load_queries("crawlq.stores.sqlite")["migrations_create"])
    for version, name, sql in migration_files()[:done]:
        for statement in split_statements(sql):
            conn.execute(statement)
        conn.execute("INSERT INTO crawlq_migrations VALUES (?, ?, 0)", (version, name))


def url(path: Path) -> str:
    return "sqlite:///" + str(path)


def schema(path: Path) -> Schema:
    """Every table, index and trigger of the file, apart from SQLite's own bookkeeping."""
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master "
            "WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"
        ).fetchall()
    return [(t, n, tbl, " ".join((sql or "").split())) for t, n, tbl, sql in rows]


def applied(path: Path) -> list[tuple[int, str]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(
            "SELECT version, name FROM crawlq_migrations ORDER BY version"
        ).fetchall()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "jobs.db"


@pytest.fixture
def fresh_schema(tmp_path: Path) -> Iterator[Schema]:
    """The schema of a store opened on an empty file."""
    path = tmp_path / "fresh.db"
    store = open_store(url(path))
    store.close()
    yield schema(path)


def test_migration_files_are_numbered_from_one_without_gaps() -> None:
    versions = [version for version, _, _ in migration_files()]
    assert versions == list(range(1, len(versions) + 1))


def test_a_fresh_store_has_exactly_the_schema_of_its_migration_files(
    tmp_path: Path, fresh_schema: Schema
) -> None:
    by_hand = tmp_path / "by_hand.db"
    with closing(sqlite3.connect(by_hand)) as conn:
        for _, _, sql in migration_files():
            for statement in split_statements(sql):
                conn.execute(statement)
        conn.commit()
    expected = [row for row in fresh_schema if row[1] != "crawlq_migrations"]
    assert schema(by_hand) == expected
    assert any(row[1] == "crawlq_migrations" for row in fresh_schema)


@pytest.mark.parametrize("done", range(len(migration_files()) + 1))
def test_every_earlier_version_migrates_to_the_fresh_schema(
    db: Path, fresh_schema: Schema, done: int
) -> None:
    """A file left at version ``done`` by an older crawlq reaches today's schema."""
    with closing(sqlite3.connect(db)) as conn:
        migrate_by_hand(conn, done)
        conn.commit()
    open_store(url(db)).close()
    assert schema(db) == fresh_schema
    assert applied(db) == [(version, name) for version, name, _ in migration_files()]


def test_a_file_with_the_update_trigger_0003_made_reaches_the_fresh_schema(
    db: Path, fresh_schema: Schema
) -> None:
    """0003 as released made crawlq_jobs_counts_update, which 0006 replaces (0003 no
    longer makes it): a file at version 5 that has it reaches today's schema too."""
    with closing(sqlite3.connect(db)) as conn:
        migrate_by_hand(conn, 5)
        conn.execute(
            "CREATE TRIGGER crawlq_jobs_counts_update AFTER UPDATE OF state ON crawlq_jobs "
            "BEGIN SELECT RAISE(ABORT, 'released body'); END"
        )
        conn.commit()
    open_store(url(db)).close()
    assert schema(db) == fresh_schema


def test_opening_twice_applies_nothing_again(db: Path) -> None:
    store = open_store(url(db))
    [scheduled] = store.job_schedule([JobSpec(queue="q", task="t", key="k")])
    store.close()
    with closing(sqlite3.connect(db)) as conn:
        first = conn.execute("SELECT * FROM crawlq_migrations ORDER BY version").fetchall()
    assert [(v, n) for v, n, _ in first] == [(v, n) for v, n, _ in migration_files()]

    again = open_store(url(db))
    try:
        assert isinstance(again, SQLiteStore)
        assert again.migrate() == []
        assert [j.id for j in again.job_list(JobFilter())] == [scheduled.job_id]
    finally:
        again.close()
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT * FROM crawlq_migrations ORDER BY version").fetchall() == first


def _open_files(path: Path) -> list[str]:
    fds = Path("/proc/self/fd")
    found = []
    for fd in fds.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(str(path)):
            found.append(target)
    return found


def test_a_newer_schema_version_is_refused(db: Path) -> None:
    open_store(url(db)).close()
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("INSERT INTO crawlq_migrations VALUES (9999, '9999_future.sql', 0)")
        conn.commit()
    before = schema(db)
    with pytest.raises(ConfigurationError) as refused:
        open_store(url(db))
    message = str(refused.value)
    assert "9999" in message and "newer" in message and str(db) in message
    assert "upgrade crawlq" in message
    assert schema(db) == before
    if Path("/proc/self/fd").is_dir():
        assert _open_files(db) == [], "a refused store keeps no file open"


CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from crawlq.jobs import JobSpec, WorkerInfo
    from crawlq.stores import open_store

    url, go, name = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    while not go.exists():
        time.sleep(0.001)
    store = open_store(url)
    store.job_schedule([JobSpec(queue="q", task="t", key=name)])
    store.close()
    print("ok", name)
    """
)


def test_processes_opening_a_new_file_at_once_all_succeed(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    go = tmp_path / "go"
    names = [f"p{i}" for i in range(6)]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, url(db), str(go), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in names
    ]
    time.sleep(0.3)  # let every child import crawlq and reach the start line
    go.touch()
    outputs = [child.communicate(timeout=60) for child in children]
    for child, (out, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err
        assert out.startswith("ok"), (out, err)
    assert applied(db) == [(version, name) for version, name, _ in migration_files()]
    store: Store = open_store(url(db))
    try:
        assert sorted(j.key or "" for j in store.job_list(JobFilter())) == names
    finally:
        store.close()


def test_the_jobs_table_rebuild_keeps_rows_counters_and_the_id_sequence(db: Path) -> None:
    """0003 rebuilds crawlq_jobs (SQLite cannot alter its CHECK): every row, the per-queue
    counters and the id high-water mark survive, and live keys stay unique."""
    columns = "queue, task, args, kwargs, key, priority, run_at, state, max_attempts, "
    columns += "lease_seconds, created_at, lease_token, worker_id"
    rows = [
        ("q", "t", "[1]", "{}", "a", 0, 10.0, "ready", 3, 30.0, 1.0, None, None),
        ("q", "t", "[2]", "{}", None, 5, 9e9, "scheduled", 3, 30.0, 1.0, None, None),
        ("q", "t", "[3]", "{}", "b", 0, 10.0, "running", 3, 30.0, 1.0, "tok", "w"),
        ("r", "t", "[4]", "{}", None, 0, 10.0, "done", 3, 30.0, 1.0, None, None),
        ("q", "t", "[5]", "{}", None, 0, 10.0, "dead", 3, 30.0, 1.0, None, None),
        ("q", "t", "[6]", "{}", None, 0, 10.0, "ready", 3, 30.0, 1.0, None, None),
    ]
    with closing(sqlite3.connect(db)) as conn:
        migrate_by_hand(conn, 2)
        conn.executemany(f"INSERT INTO crawlq_jobs ({columns}) VALUES ({'?, ' * 12}?)", rows)
        conn.execute("DELETE FROM crawlq_jobs WHERE id = 6")  # the high-water mark stays 6
        conn.commit()
        before = conn.execute(f"SELECT id, {columns} FROM crawlq_jobs ORDER BY id").fetchall()
        counts = conn.execute("SELECT * FROM crawlq_counts ORDER BY queue, state").fetchall()
    store = open_store(url(db))
    try:
        with closing(sqlite3.connect(db)) as conn:
            after = conn.execute(f"SELECT id, {columns} FROM crawlq_jobs ORDER BY id").fetchall()
            assert after == before
            assert (
                conn.execute("SELECT * FROM crawlq_counts ORDER BY queue, state").fetchall()
                == counts
            )
        assert [j.crawl_id for j in store.job_list(JobFilter())] == [None] * 5
        results = store.job_schedule(
            [
                JobSpec(queue="q", task="t"),  # after the high-water mark, not after 5
                JobSpec(queue="q", task="t", key="a"),  # pending: updated in place
                JobSpec(queue="q", task="t", key="b"),  # running: deferred
            ]
        )
        assert [(r.job_id, r.outcome.value) for r in results] == [
            (7, "created"),
            (1, "updated"),
            (3, "deferred"),
        ]
    finally:
        store.close()


def test_0004_keeps_crawls_and_seen_sets_and_adds_the_cache_and_results(db: Path) -> None:
    """A file at version 3 with a crawl, its seen set and jobs reaches version 4 with all
    of them intact; the new cache and results work on the old crawl."""
    old = migration_files()[:3]
    assert [name for _, name, _ in old][-1] == "0003_crawls.sql"
    with closing(sqlite3.connect(db)) as conn:
        migrate_by_hand(conn, len(old))
        conn.commit()
    # the crawl and its jobs written by a crawlq that knew only 0001 to 0003
    with closing(sqlite3.connect(db)) as conn:
        conn.execute(
            "INSERT INTO crawlq_crawls (name, meta, state, created_at) "
            "VALUES ('old', '{}', 'running', 1.0)"
        )
        conn.execute("INSERT INTO crawlq_seen (crawl_id, fp) VALUES (1, ?)", (bytes(16),))
        conn.execute(
            "INSERT INTO crawlq_jobs (queue, task, args, kwargs, priority, run_at, state, "
            "max_attempts, lease_seconds, created_at, crawl_id) "
            "VALUES ('q', 't', '[]', '{}', 0, 1e12, 'scheduled', 3, 30, 1.0, 1)"
        )
        conn.commit()
        crawls_before = conn.execute("SELECT * FROM crawlq_crawls").fetchall()
        jobs_before = conn.execute("SELECT * FROM crawlq_jobs").fetchall()
    store = open_store(url(db))
    try:
        assert "0004_cache_results.sql" in [name for _, name in applied(db)]
        with closing(sqlite3.connect(db)) as conn:
            assert conn.execute("SELECT * FROM crawlq_crawls").fetchall() == crawls_before
            jobs = conn.execute("SELECT * FROM crawlq_jobs").fetchall()
            width = len(jobs_before[0])  # later migrations add columns after these
            assert [job[:width] for job in jobs] == jobs_before
        info = store.crawl_get(1)
        assert info is not None and (info.name, info.pending, info.seen) == ("old", 1, 1)
        assert store.seen_add(1, [bytes(16), b"x" * 16]) == [False, True]
        assert store.result_add(1, [(bytes(16), "record")]) == [True]
        assert store.result_list(1) == [(1, "record")]
        store.cache_set("k", "v", 60)
        assert store.cache_get("k") == "v"
    finally:
        store.close()


def test_0005_keeps_the_workers_and_adds_their_process_identity(db: Path) -> None:
    """A worker registered by a crawlq at version 4 is listed as it was, with no process
    identity (it waits for its heartbeat); a worker registered now keeps its identity."""
    old = migration_files()[:4]
    assert [name for _, name, _ in old][-1] == "0004_cache_results.sql"
    with closing(sqlite3.connect(db)) as conn:
        migrate_by_hand(conn, len(old))
        conn.execute(
            "INSERT INTO crawlq_workers VALUES ('w-old', 'box', 7, '[\"q\"]', 'thread', 2, "
            "1.0, 2.0, 1, 5, 0, NULL, 'stopped', 3.0)"
        )
        conn.commit()
    store = open_store(url(db))
    try:
        assert "0005_worker_process.sql" in [name for _, name in applied(db)]
        [w] = store.worker_list()
        assert (w.id, w.pid, w.done, w.state, w.process) == ("w-old", 7, 5, "stopped", None)
        new = WorkerInfo(
            id="w-new", host="box", pid=8, queues=("q",), runtime="thread", concurrency=1,
            process="linux:b:1:8:9",
        )  # fmt: skip
        store.worker_register(new)
        assert {w.id: w.process for w in store.worker_list()}["w-new"] == "linux:b:1:8:9"
    finally:
        store.close()


def test_0009_keeps_one_live_job_per_key_and_the_ended_jobs_release_theirs(db: Path) -> None:
    """0009 indexes the jobs that hold their keys: in a file at version 8 every live job
    holds its key and every ended one (several may share a key) releases its own, so a
    key whose jobs have all ended takes a new job, and a live one merges as before."""
    old = migration_files()[:8]
    assert [name for _, name, _ in old][-1] == "0008_crawl_path.sql"
    rows = [  # (key, state, finished_at)
        ("a", "done", 5.0),
        ("a", "ready", None),
        ("b", "cancelled", 6.0),
        ("b", "dead", 7.0),
        ("c", "scheduled", None),
    ]
    with closing(sqlite3.connect(db)) as conn:
        migrate_by_hand(conn, len(old))
        conn.executemany(
            "INSERT INTO crawlq_jobs (queue, task, args, kwargs, key, priority, run_at, state, "
            "max_attempts, lease_seconds, created_at, finished_at) "
            "VALUES ('q', 't', '[]', '{}', ?, 0, 1.0, ?, 3, 60, 2.0, ?)",
            rows,
        )
        conn.commit()
    store = open_store(url(db))
    try:
        assert "0009_key_holders.sql" in [name for _, name in applied(db)]
        with closing(sqlite3.connect(db)) as conn:
            released = conn.execute("SELECT key_released FROM crawlq_jobs ORDER BY id")
            assert [r for (r,) in released] == [5.0, None, 6.0, 7.0, None]
        jobs = store.job_list(JobFilter())
        again = store.job_schedule([JobSpec(queue="q", task="t", key=k) for k in "abc"])
        assert [r.outcome.value for r in again] == ["updated", "created", "updated"]
        assert [r.job_id for r in again][::2] == [jobs[1].id, jobs[4].id]
        assert store.job_requeue(JobFilter(ids=[jobs[3].id])) == []  # b's new job holds it
    finally:
        store.close()
