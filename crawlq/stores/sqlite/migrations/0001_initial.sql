-- Jobs, their per-queue counters and the indexes that serve the claim.
--
-- Internal states: 'scheduled' (pending, run_at in the future when last looked at),
-- 'ready' (pending and due: the claim index holds only these), 'running', 'done',
-- 'dead', 'cancelled'. The public JobState PENDING covers 'scheduled' and 'ready'.

CREATE TABLE crawlq_jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    queue            TEXT    NOT NULL,
    task             TEXT    NOT NULL,
    args             TEXT    NOT NULL,
    kwargs           TEXT    NOT NULL,
    key              TEXT,
    priority         INTEGER NOT NULL,
    run_at           REAL    NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN
                        ('scheduled', 'ready', 'running', 'done', 'dead', 'cancelled')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    lease_seconds    REAL    NOT NULL,
    timeout          REAL,
    worker_id        TEXT,
    lease_token      TEXT,
    lease_expires_at REAL,
    last_error       TEXT,
    dead_reason      TEXT,
    result           TEXT,
    followup         TEXT,
    created_at       REAL    NOT NULL,
    started_at       REAL,
    finished_at      REAL
);

-- The claim: due jobs of one queue in claim order. O(log n) to the first.
CREATE INDEX crawlq_jobs_claim ON crawlq_jobs (queue, priority DESC, run_at, id)
    WHERE state = 'ready';

-- Promotion of scheduled jobs that became due, and the next due time. (Partial indexes
-- are only used for queries that name the same state literally.)
CREATE INDEX crawlq_jobs_scheduled ON crawlq_jobs (queue, run_at)
    WHERE state = 'scheduled';

-- The age of the oldest due job.
CREATE INDEX crawlq_jobs_ready ON crawlq_jobs (queue, run_at)
    WHERE state = 'ready';

-- Uniqueness: at most one live job per (queue, key).
CREATE UNIQUE INDEX crawlq_jobs_key ON crawlq_jobs (queue, key)
    WHERE key IS NOT NULL AND state IN ('scheduled', 'ready', 'running');

-- Expired leases.
CREATE INDEX crawlq_jobs_lease ON crawlq_jobs (lease_expires_at)
    WHERE state = 'running';

-- Pruning, purging and the done-per-minute figure.
CREATE INDEX crawlq_jobs_finished ON crawlq_jobs (queue, state, finished_at)
    WHERE finished_at IS NOT NULL;

-- Counts per (queue, internal state), kept by triggers so stats never scan jobs.
CREATE TABLE crawlq_counts (
    queue TEXT    NOT NULL,
    state TEXT    NOT NULL,
    n     INTEGER NOT NULL,
    PRIMARY KEY (queue, state)
) WITHOUT ROWID;

CREATE TRIGGER crawlq_jobs_counts_insert AFTER INSERT ON crawlq_jobs
BEGIN
    INSERT INTO crawlq_counts (queue, state, n) VALUES (new.queue, new.state, 1)
        ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER crawlq_jobs_counts_update AFTER UPDATE OF state ON crawlq_jobs
WHEN old.state <> new.state
BEGIN
    UPDATE crawlq_counts SET n = n - 1 WHERE queue = old.queue AND state = old.state;
    INSERT INTO crawlq_counts (queue, state, n) VALUES (new.queue, new.state, 1)
        ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER crawlq_jobs_counts_delete AFTER DELETE ON crawlq_jobs
BEGIN
    UPDATE crawlq_counts SET n = n - 1 WHERE queue = old.queue AND state = old.state;
END;
