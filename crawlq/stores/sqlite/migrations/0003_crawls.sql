-- Crawls, seen sets and per-key limits (issue 6).
--
-- Jobs gain crawl_id, limit_key and own_run_at (the run_at a limit key's front job had
-- before its key's gate pushed it later), and two internal states: 'waiting' (pending
-- behind its limit key's front) and 'held' (pending in a paused crawl). SQLite cannot
-- alter a CHECK constraint, so the table is rebuilt: rows, the id sequence, indexes and
-- triggers are kept. Every pending state now holds the (queue, key) uniqueness.

CREATE TABLE crawlq_jobs_new (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    queue            TEXT    NOT NULL,
    task             TEXT    NOT NULL,
    args             TEXT    NOT NULL,
    kwargs           TEXT    NOT NULL,
    key              TEXT,
    priority         INTEGER NOT NULL,
    run_at           REAL    NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN
                        ('scheduled', 'ready', 'waiting', 'held', 'running', 'done', 'dead',
                         'cancelled')),
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
    finished_at      REAL,
    crawl_id         INTEGER,
    limit_key        TEXT,
    own_run_at       REAL
);

INSERT INTO crawlq_jobs_new (id, queue, task, args, kwargs, key, priority, run_at, state,
                             attempts, max_attempts, lease_seconds, timeout, worker_id,
                             lease_token, lease_expires_at, last_error, dead_reason, result,
                             followup, created_at, started_at, finished_at)
SELECT id, queue, task, args, kwargs, key, priority, run_at, state, attempts, max_attempts,
       lease_seconds, timeout, worker_id, lease_token, lease_expires_at, last_error,
       dead_reason, result, followup, created_at, started_at, finished_at
FROM crawlq_jobs;

-- Keep the AUTOINCREMENT high-water mark: ids are never reused, even of pruned jobs.
DELETE FROM sqlite_sequence WHERE name = 'crawlq_jobs_new';

UPDATE sqlite_sequence SET name = 'crawlq_jobs_new' WHERE name = 'crawlq_jobs';

DROP TABLE crawlq_jobs;

ALTER TABLE crawlq_jobs_new RENAME TO crawlq_jobs;

-- The indexes of 0001 and 0002, unchanged but for the live states of the key index.
CREATE INDEX crawlq_jobs_claim ON crawlq_jobs (queue, priority DESC, run_at, id)
    WHERE state = 'ready';

CREATE INDEX crawlq_jobs_scheduled ON crawlq_jobs (queue, run_at)
    WHERE state = 'scheduled';

CREATE INDEX crawlq_jobs_ready ON crawlq_jobs (queue, run_at)
    WHERE state = 'ready';

CREATE UNIQUE INDEX crawlq_jobs_key ON crawlq_jobs (queue, key)
    WHERE key IS NOT NULL AND state IN ('scheduled', 'ready', 'waiting', 'held', 'running');

CREATE INDEX crawlq_jobs_lease ON crawlq_jobs (lease_expires_at)
    WHERE state = 'running';

CREATE INDEX crawlq_jobs_finished ON crawlq_jobs (queue, state, finished_at)
    WHERE finished_at IS NOT NULL;

CREATE INDEX crawlq_jobs_worker ON crawlq_jobs (worker_id)
    WHERE state = 'running';

-- Pause, resume and cancel of a crawl: its pending jobs, without scanning other jobs.
-- (crawl_id IS NOT NULL keeps jobs outside crawls out of it: they pay nothing for it.)
CREATE INDEX crawlq_jobs_crawl ON crawlq_jobs (crawl_id)
    WHERE crawl_id IS NOT NULL AND state IN ('scheduled', 'ready', 'waiting', 'held');

-- A limit key's next front: its best waiting job (claim order).
CREATE INDEX crawlq_jobs_waiting ON crawlq_jobs (limit_key, priority DESC, run_at, id)
    WHERE state = 'waiting';

-- Crawls. state: 'running', 'paused', 'finished', 'cancelled'. on_finish is the JobSpec
-- (JSON, kwargs.crawl_id added) scheduled when it finishes; limits the JSON of its
-- Limits. The counters are kept by the triggers below (pending covers scheduled, ready,
-- waiting and held); deleting a job never changes them.
CREATE TABLE crawlq_crawls (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    name          TEXT    NOT NULL,
    meta          TEXT    NOT NULL,
    state         TEXT    NOT NULL CHECK (state IN
                     ('running', 'paused', 'finished', 'cancelled')),
    on_finish     TEXT,
    on_finish_job INTEGER,
    limits        TEXT,
    pending       INTEGER NOT NULL DEFAULT 0,
    running       INTEGER NOT NULL DEFAULT 0,
    done          INTEGER NOT NULL DEFAULT 0,
    dead          INTEGER NOT NULL DEFAULT 0,
    cancelled     INTEGER NOT NULL DEFAULT 0,
    seen          INTEGER NOT NULL DEFAULT 0,
    created_at    REAL    NOT NULL,
    finished_at   REAL
);

CREATE INDEX crawlq_crawls_state ON crawlq_crawls (state, id);

-- A crawl's seen set: each fingerprint (16 bytes) once, for ever.
CREATE TABLE crawlq_seen (
    crawl_id INTEGER NOT NULL,
    fp       BLOB    NOT NULL,
    PRIMARY KEY (crawl_id, fp)
) WITHOUT ROWID;

CREATE TRIGGER crawlq_seen_count AFTER INSERT ON crawlq_seen
BEGIN
    UPDATE crawlq_crawls SET seen = seen + 1 WHERE id = new.crawl_id;
END;

-- Limit keys. source: 'none' (made by limit_block, settings not fixed yet), 'default'
-- (fixed by the first job that used the key), 'override' (limit_set). pending counts the
-- key's pending jobs (front, waiting, held), running its running ones; front is the one
-- pending job of the key that is in the claim index (ready or scheduled), if any.
CREATE TABLE crawlq_limits (
    key           TEXT    PRIMARY KEY,
    max_running   INTEGER,
    min_interval  REAL    NOT NULL DEFAULT 0,
    source        TEXT    NOT NULL CHECK (source IN ('none', 'default', 'override')),
    blocked_until REAL,
    running       INTEGER NOT NULL DEFAULT 0,
    last_start    REAL,
    pending       INTEGER NOT NULL DEFAULT 0,
    front         INTEGER
) WITHOUT ROWID;

-- The settings a new key takes from the queue of its first job.
CREATE TABLE crawlq_limit_defaults (
    queue        TEXT    PRIMARY KEY,
    max_running  INTEGER,
    min_interval REAL    NOT NULL
) WITHOUT ROWID;

-- The counters, kept by triggers so that stats and crawls never scan jobs: per (queue,
-- internal state) as in 0001, per crawl and per limit key. The crawl and key statements
-- are guarded by a WHERE that does not depend on any row, evaluated once: a job outside
-- crawls and limit keys costs one trigger program, as before. A key's front stops being
-- its front when it leaves the claim index (claimed, held, cancelled, demoted); a claim
-- is the key's last start. Deleting a job changes neither crawl nor key counters.
-- State tests are OR chains, not IN lists: in a trigger SQLite builds an IN list's lookup
-- table again for every row, which made a keyed state change four times as costly.
CREATE TRIGGER crawlq_jobs_counts_insert AFTER INSERT ON crawlq_jobs
BEGIN
    INSERT INTO crawlq_counts (queue, state, n) VALUES (new.queue, new.state, 1)
        ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
    UPDATE crawlq_crawls
    SET pending = pending + (new.state = 'scheduled' OR new.state = 'ready'
                             OR new.state = 'waiting' OR new.state = 'held'),
        running = running + (new.state = 'running'),
        done = done + (new.state = 'done'),
        dead = dead + (new.state = 'dead'),
        cancelled = cancelled + (new.state = 'cancelled')
    WHERE new.crawl_id IS NOT NULL AND id = new.crawl_id;
    UPDATE crawlq_limits
    SET pending = pending + (new.state = 'scheduled' OR new.state = 'ready'
                             OR new.state = 'waiting' OR new.state = 'held'),
        running = running + (new.state = 'running')
    WHERE new.limit_key IS NOT NULL AND key = new.limit_key;
END;

-- The update trigger (crawlq_jobs_counts_update: the same counters as a job changes
-- state) was first made here; 0006_totals.sql replaces it with one statement more, and
-- its body was taken out of this file (issue 18). A file that ran this one as it was has
-- it replaced by 0006; one migrating from before it runs every later migration in the
-- same transaction, so 0006 makes it before any job changes. Both end the same
-- (tests/migration checks every earlier version).

CREATE TRIGGER crawlq_jobs_counts_delete AFTER DELETE ON crawlq_jobs
BEGIN
    UPDATE crawlq_counts SET n = n - 1 WHERE queue = old.queue AND state = old.state;
END;
