-- Workers, the index that finds a worker's running jobs, and maintenance leases.
--
-- Worker states: 'alive' (registered, heartbeating), 'stopped' (clean exit), 'dead'
-- (declared dead by worker_reap, which returned its running jobs).

CREATE TABLE crawlq_workers (
    id             TEXT    PRIMARY KEY,
    host           TEXT    NOT NULL,
    pid            INTEGER NOT NULL,
    queues         TEXT    NOT NULL,  -- a JSON list of queue names
    runtime        TEXT    NOT NULL,
    concurrency    INTEGER NOT NULL,
    started_at     REAL    NOT NULL,
    last_heartbeat REAL    NOT NULL,
    running        INTEGER NOT NULL,
    done           INTEGER NOT NULL,
    failed         INTEGER NOT NULL,
    rss_bytes      INTEGER,
    state          TEXT    NOT NULL CHECK (state IN ('alive', 'stopped', 'dead')),
    stopped_at     REAL
);

-- worker_reap: alive workers by last heartbeat.
CREATE INDEX crawlq_workers_alive ON crawlq_workers (last_heartbeat)
    WHERE state = 'alive';

-- worker_reap: the running jobs of one worker, without scanning the running jobs.
CREATE INDEX crawlq_jobs_worker ON crawlq_jobs (worker_id)
    WHERE state = 'running';

-- Named leases on maintenance duties (one owner at a time until expires_at).
CREATE TABLE crawlq_maintenance (
    duty       TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    expires_at REAL NOT NULL
) WITHOUT ROWID;
