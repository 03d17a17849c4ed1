-- Jobs, their per-queue counters, the indexes that serve the claim, and the triggers
-- that keep the counters and wake idle workers. Every name is unqualified: the store
-- sets search_path to its own schema (``?schema=``, default crawlq) before running this.
--
-- Internal states: 'scheduled' (pending, run_at in the future when last looked at),
-- 'ready' (pending and due: the claim index holds only these), 'running', 'done',
-- 'dead', 'cancelled'. The public JobState PENDING covers 'scheduled' and 'ready'.
-- Times are seconds since the Unix epoch (double precision), as in the other stores.

-- The store's clock: the given instant, else the transaction's start on the server's
-- clock. Plain SQL, so the planner inlines it and index conditions can use it.
CREATE FUNCTION crawlq_now(t double precision) RETURNS double precision
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT coalesce(t, extract(epoch FROM now())::double precision) $$;

CREATE TABLE crawlq_jobs (
    id               bigserial        PRIMARY KEY,
    queue            text COLLATE "C" NOT NULL,
    task             text             NOT NULL,
    args             json             NOT NULL,
    kwargs           json             NOT NULL,
    key              text COLLATE "C",
    priority         bigint           NOT NULL,
    run_at           double precision NOT NULL,
    state            text COLLATE "C" NOT NULL CHECK (state IN
                        ('scheduled', 'ready', 'running', 'done', 'dead', 'cancelled')),
    attempts         integer          NOT NULL DEFAULT 0,
    max_attempts     integer          NOT NULL,
    lease_seconds    double precision NOT NULL,
    timeout          double precision,
    worker_id        text,
    lease_token      text,
    lease_expires_at double precision,
    last_error       text,
    dead_reason      text,
    result           json,
    followup         json,
    created_at       double precision NOT NULL,
    started_at       double precision,
    finished_at      double precision,
    -- The lease token fences heartbeat, complete, fail and release: it exists exactly
    -- while the job runs, so that matching it is enough.
    CHECK ((state = 'running') = (lease_token IS NOT NULL))
);

-- The claim: due jobs of one queue in claim order. O(log n) to the first.
CREATE INDEX crawlq_jobs_claim ON crawlq_jobs (queue, priority DESC, run_at, id)
    WHERE state = 'ready';

-- Promotion of scheduled jobs that became due, and the next due time.
CREATE INDEX crawlq_jobs_scheduled ON crawlq_jobs (queue, run_at)
    WHERE state = 'scheduled';

-- The age of the oldest due job, and the next due time.
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

-- Counts per (queue, internal state). Writers never update a counter row: each
-- statement on crawlq_jobs appends its net change per (queue, state) to
-- crawlq_count_deltas (no lock, so concurrent claims never queue behind one hot row),
-- and maintenance folds the deltas into crawlq_counts. A count is the sum of both.
CREATE TABLE crawlq_counts (
    queue text COLLATE "C" NOT NULL,
    state text COLLATE "C" NOT NULL,
    n     bigint           NOT NULL,
    PRIMARY KEY (queue, state)
);

CREATE TABLE crawlq_count_deltas (
    queue text COLLATE "C" NOT NULL,
    state text COLLATE "C" NOT NULL,
    n     bigint           NOT NULL
);

-- Statement-level triggers (one per event: transition tables allow no more), in the
-- transaction of the change:
-- - they append the net count changes to crawlq_count_deltas;
-- - they NOTIFY channel crawlq_jobs, payload '<schema>:<queue>', for every queue that got
--   a job to wait for: a new pending job, a job back to pending, or a new run_at;
-- - a job that ends (running to done or dead) turns its remembered request (followup)
--   into a pending job, created when the job finished; one whose key is live is dropped.

CREATE FUNCTION crawlq_jobs_inserted() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO crawlq_count_deltas (queue, state, n)
    SELECT queue, state, count(*) FROM new_rows GROUP BY queue, state;
    PERFORM pg_notify('crawlq_jobs', TG_TABLE_SCHEMA || ':' || queue)
    FROM (SELECT DISTINCT queue FROM new_rows
          WHERE state IN ('scheduled', 'ready')) AS woken;
    RETURN NULL;
END $$;

CREATE FUNCTION crawlq_jobs_updated() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM new_rows) THEN
        RETURN NULL;
    END IF;
    INSERT INTO crawlq_count_deltas (queue, state, n)
    SELECT queue, state, sum(n)
    FROM (SELECT queue, state, 1 AS n FROM new_rows
          UNION ALL
          SELECT queue, state, -1 AS n FROM old_rows) AS changes
    GROUP BY queue, state
    HAVING sum(n) <> 0;
    PERFORM pg_notify('crawlq_jobs', TG_TABLE_SCHEMA || ':' || queue)
    FROM (SELECT DISTINCT new_rows.queue
          FROM new_rows JOIN old_rows ON old_rows.id = new_rows.id
          WHERE new_rows.state IN ('scheduled', 'ready')
            AND (old_rows.state NOT IN ('scheduled', 'ready')
                 OR old_rows.run_at <> new_rows.run_at)) AS woken;
    INSERT INTO crawlq_jobs (queue, task, args, kwargs, key, priority, run_at, state,
                             max_attempts, lease_seconds, timeout, created_at)
    SELECT new_rows.queue, f.task, f.args, f.kwargs, new_rows.key, f.priority, f.run_at,
           CASE WHEN f.run_at <= new_rows.finished_at THEN 'ready' ELSE 'scheduled' END,
           f.max_attempts, f.lease_seconds, f.timeout, new_rows.finished_at
    FROM new_rows
    JOIN old_rows ON old_rows.id = new_rows.id
    CROSS JOIN LATERAL json_to_record(new_rows.followup) AS f(
        task text, args json, kwargs json, priority bigint, run_at double precision,
        max_attempts integer, lease_seconds double precision, timeout double precision)
    WHERE old_rows.state = 'running' AND new_rows.state IN ('done', 'dead')
      AND new_rows.followup IS NOT NULL
    ORDER BY new_rows.id
    ON CONFLICT (queue, key) WHERE key IS NOT NULL AND state IN ('scheduled', 'ready', 'running')
    DO NOTHING;
    RETURN NULL;
END $$;

CREATE FUNCTION crawlq_jobs_deleted() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO crawlq_count_deltas (queue, state, n)
    SELECT queue, state, -count(*) FROM old_rows GROUP BY queue, state;
    RETURN NULL;
END $$;

CREATE TRIGGER crawlq_jobs_inserted AFTER INSERT ON crawlq_jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION crawlq_jobs_inserted();

CREATE TRIGGER crawlq_jobs_updated AFTER UPDATE ON crawlq_jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION crawlq_jobs_updated();

CREATE TRIGGER crawlq_jobs_deleted AFTER DELETE ON crawlq_jobs
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION crawlq_jobs_deleted();
