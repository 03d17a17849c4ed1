"""PostgreSQL schema migrations that change what existing rows mean: a schema migrated
from an earlier version keeps its jobs and behaves as a fresh one."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import crawlq
from crawlq.jobs import JobSpec, JobState, Lease, Outcome, WorkerInfo
from crawlq.stores.base import ClaimParams, Completion, JobFilter
from tests import servers

psycopg = pytest.importorskip("psycopg")

from crawlq.stores.postgres import store as pg  # noqa: E402

T0 = 1_000_000.0
LONG = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(160))
"""10 kB that do not compress: over the 2.7 kB a btree entry holds."""


@pytest.fixture
def schema(tmp_path: Path) -> str:
    return servers.isolated_name(tmp_path, "m_")


@pytest.fixture
def raw(schema: str) -> Iterator[Any]:
    conn = psycopg.connect(servers.postgres().url, autocommit=True)
    conn.execute(pg.Q["session_setup"], {"schema": schema})
    yield conn
    conn.close()


def _open(schema: str) -> pg.PostgresStore:
    store = crawlq.open_store(f"{servers.postgres().url}?schema={schema}")
    assert isinstance(store, pg.PostgresStore)
    return store


def _insert(raw: Any, key: str, running: bool = False) -> int:
    """A job written as crawlq 0004 would have: pending, or running under lease 'tok'."""
    row = raw.execute(
        "INSERT INTO crawlq_jobs (queue, task, args, kwargs, key, priority, run_at, state, "
        "max_attempts, lease_seconds, created_at, attempts, worker_id, lease_token, "
        "lease_expires_at, started_at) "
        "VALUES ('q', 't', '[]', '{}', %(key)s, 0, %(t)s, %(state)s, 3, 30, %(t)s, "
        "%(attempts)s, %(worker)s, %(token)s, %(expires)s, %(started)s) RETURNING id",
        {
            "key": key,
            "t": T0,
            "state": "running" if running else "ready",
            "attempts": 1 if running else 0,
            "worker": "w" if running else None,
            "token": "tok" if running else None,
            "expires": T0 + 30 if running else None,
            "started": T0 if running else None,
        },
    ).fetchone()
    return int(row[0])


def test_a_schema_at_0004_with_live_keys_migrates_to_0005(
    schema: str, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0005 indexes keys by their digest: the live keys of a 0004 schema stay unique,
    a running job's remembered request still becomes a job, a key record keeps its
    limits, and long keys then work."""
    known = pg._known_migrations()
    monkeypatch.setattr(pg, "_known_migrations", lambda: {v: known[v] for v in (1, 2, 3, 4)})
    _open(schema).close()
    monkeypatch.undo()
    waiting = _insert(raw, "pending-key")
    running_id = _insert(raw, "running-key", running=True)
    raw.execute("INSERT INTO crawlq_keys (key, max_running, source) VALUES ('host', 1, 'override')")

    new = _open(schema)
    versions = [r[0] for r in raw.execute("SELECT version FROM crawlq_migrations ORDER BY 1")]
    assert versions[:5] == [1, 2, 3, 4, 5]
    [indexdef] = raw.execute(
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'crawlq_jobs_key' AND schemaname = %s",
        (schema,),
    ).fetchone()
    assert "(queue, key_digest)" in indexdef
    digests = raw.execute(
        "SELECT count(*) FROM crawlq_jobs WHERE key_digest = crawlq_digest(key)"
    ).fetchone()
    assert digests == (2,), "the live jobs' keys got their digests"
    [merged] = new.job_schedule([JobSpec(queue="q", task="t", key="pending-key", args=[1])])
    assert (merged.job_id, merged.outcome) == (waiting, Outcome.UPDATED)
    [deferred] = new.job_schedule([JobSpec(queue="q", task="t", key="running-key")])
    assert (deferred.job_id, deferred.outcome) == (running_id, Outcome.DEFERRED)
    assert new.job_complete([Completion(lease=Lease(running_id, "tok"))], now=T0) == [True]
    live = [
        j
        for j in new.job_list(JobFilter(queue="q"))
        if j.key == "running-key" and j.id != running_id
    ]
    assert len(live) == 1, "the remembered request became a job, through the new index"
    [record] = new.limit_get(["host"])
    assert record is not None and record.limits.max_running == 1, "the key record is found"
    new.job_schedule([JobSpec(queue="h", task="t", limit_key="host") for _ in range(2)])
    assert len(new.job_claim(ClaimParams(queues=["h"], worker_id="w", limit=5))) == 1
    [long_key] = new.job_schedule([JobSpec(queue="q", task="t", key=LONG)])
    [again] = new.job_schedule([JobSpec(queue="q", task="t", key=LONG, args=[2])])
    assert (again.job_id, again.outcome) == (long_key.job_id, Outcome.UPDATED)
    new.close()


def test_a_schema_at_0007_with_a_crawl_migrates_to_0008(
    schema: str, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0008 states the pending-state rule once (crawlq_pending_state) and replaces the
    trigger functions that stated it inline: a running job of a crawl, written as crawlq
    0007 would have, still turns its remembered request into a job waiting behind its
    limit key when it completes, and a paused crawl's jobs are held. The rows are written
    with triggers off and the crawl's counters by hand: the functions 0008 replaces are
    no longer in the files of 0003 and 0005, so a schema made from today's files
    differs from a released one at 0007 in those only (see 0003_crawls.sql)."""
    known = pg._known_migrations()
    monkeypatch.setattr(pg, "_known_migrations", lambda: {v: known[v] for v in range(1, 8)})
    _open(schema).close()
    monkeypatch.undo()
    raw.execute("SET session_replication_role = replica")  # no triggers: rows as they were
    [crawl] = raw.execute(
        "INSERT INTO crawlq_crawls (name, meta, state, created_at, changed_at, running) "
        "VALUES ('c', '{}', 'running', %(t)s, %(t)s, 1) RETURNING id",
        {"t": T0},
    ).fetchone()
    followup = (
        '{"task": "t", "args": [2], "kwargs": {}, "priority": 0, "run_at": 1000000.0, '
        '"max_attempts": 3, "lease_seconds": 30, "timeout": null, '
        f'"crawl": {crawl}, "limit_key": "host"}}'
    )
    [running_id] = raw.execute(
        "INSERT INTO crawlq_jobs (queue, task, args, kwargs, key, key_digest, priority, "
        "run_at, state, max_attempts, lease_seconds, created_at, attempts, worker_id, "
        "lease_token, lease_expires_at, started_at, crawl_id, followup) "
        "VALUES ('q', 't', '[]', '{}', 'k', crawlq_digest('k'), 0, %(t)s, 'running', 3, 30, "
        "%(t)s, 1, 'w', 'tok', %(t)s + 30, %(t)s, %(crawl)s, %(followup)s) RETURNING id",
        {"t": T0, "crawl": crawl, "followup": followup},
    ).fetchone()
    raw.execute("INSERT INTO crawlq_counts VALUES ('q', 'running', 1)")
    raw.execute("SET session_replication_role = DEFAULT")

    new = _open(schema)
    versions = [r[0] for r in raw.execute("SELECT version FROM crawlq_migrations ORDER BY 1")]
    assert versions[:8] == list(range(1, 9))
    assert new.job_complete([Completion(lease=Lease(running_id, "tok"))], now=T0) == [True]
    [spawned] = [j for j in new.job_list(JobFilter(crawl=crawl)) if j.id != running_id]
    assert (spawned.key, spawned.limit_key, spawned.args) == ("k", "host", [2])
    [state] = raw.execute("SELECT state FROM crawlq_jobs WHERE id = %s", (spawned.id,)).fetchone()
    assert state in ("ready", "scheduled"), "the key's front: in the claim index"
    info = new.crawl_get(crawl)
    assert info is not None and (info.pending, info.done) == (1, 1)
    assert new.crawl_pause(crawl, now=T0)
    [state] = raw.execute("SELECT state FROM crawlq_jobs WHERE id = %s", (spawned.id,)).fetchone()
    assert state == "held"
    assert new.crawl_resume(crawl, now=T0)
    assert len(new.job_claim(ClaimParams(queues=["q"], worker_id="w", limit=5, now=T0))) == 1
    new.close()


def test_a_schema_at_0012_migrates_to_0013_and_reads_due_times_and_lost_workers(
    schema: str, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0013 drops the run_at index of ready jobs and the worker index: a schema at 0012
    with ready jobs of two priorities and a job running on a worker keeps its answers
    (the oldest ready run_at, the lost worker's job going back) from the indexes left."""
    known = pg._known_migrations()
    monkeypatch.setattr(pg, "_known_migrations", lambda: {v: known[v] for v in range(1, 13)})
    old = _open(schema)
    old.job_schedule(
        [JobSpec(task="t", queue="q", priority=p, run_at=T0 - p) for p in (0, 0, 5)], now=T0
    )
    worker = WorkerInfo(id="w1", host="h", pid=1, queues=("q",), runtime="thread", concurrency=1)
    old.worker_register(worker, now=T0)
    [job] = old.job_claim(ClaimParams(queues=["q"], worker_id="w1", limit=1, now=T0))
    old.close()
    monkeypatch.undo()

    new = _open(schema)
    names = "SELECT indexname FROM pg_indexes WHERE schemaname = %s"
    indexes = {r[0] for r in raw.execute(names, [schema])}
    assert {"crawlq_jobs_ready", "crawlq_jobs_worker"}.isdisjoint(indexes)
    assert job.priority == 5
    assert new.job_next_due(["q"]) == T0  # the two ready jobs of priority 0
    assert new.worker_reap(dead_after=60.0, gone=["w1"], now=T0) == ["w1"]
    again = new.job_get(job.id)
    assert again is not None and again.state == JobState.PENDING and again.attempts == 1
    assert new.job_next_due(["q"]) == T0 - 5
    new.close()


DIGESTED = [
    "host.test", "a\\b", "\\\\", "\\000", "\\x41", "caf\u00e9 \u6f22\u5b57", "", "tab\tq", LONG,
]  # fmt: skip
"""Texts whose digests 0014 must keep: backslashes, escapes, non-ASCII, empty, long."""


def test_a_schema_at_0013_migrates_to_0014_and_keeps_every_digest(
    schema: str, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0014 replaces crawlq_digest's body by one the planner inlines: on a schema at 0013
    with keyed jobs and key records, each digest is what 0005's body gives, the key
    records are found by their digest (a new job of a key counts in its record, not a
    second one), a keyed job is still unique, and the function is inlined."""
    known = pg._known_migrations()
    monkeypatch.setattr(pg, "_known_migrations", lambda: {v: known[v] for v in range(1, 14)})
    old = _open(schema)
    specs = [JobSpec(task="t", queue="q", key=k, limit_key=k, run_at=T0) for k in DIGESTED]
    first = old.job_schedule(specs, now=T0)
    old.close()
    monkeypatch.undo()

    new = _open(schema)
    versions = [r[0] for r in raw.execute("SELECT version FROM crawlq_migrations ORDER BY 1")]
    assert versions == list(range(1, len(known) + 1))
    for text in DIGESTED:
        [(digest, expected)] = raw.execute(
            "SELECT crawlq_digest(%(t)s), sha256(convert_to(%(t)s, 'UTF8'))", {"t": text}
        ).fetchall()
        assert digest == expected, text
    again = new.job_schedule(specs, now=T0)  # the same keys: the same jobs
    assert [r.job_id for r in again] == [r.job_id for r in first]
    new.job_schedule([JobSpec(task="t", queue="q", limit_key=k, run_at=T0) for k in DIGESTED])
    counts = raw.execute("SELECT key, pending FROM crawlq_keys").fetchall()
    assert sorted(counts) == sorted((k, 2) for k in DIGESTED)
    plan = raw.execute("EXPLAIN VERBOSE SELECT crawlq_digest(key) FROM crawlq_keys").fetchall()
    assert "sha256(decode(replace(" in " ".join(r[0] for r in plan)
    new.close()
