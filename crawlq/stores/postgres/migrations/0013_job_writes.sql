-- Two indexes fewer on the job row (issue 19). A change of state is never a heap-only
-- update (state is in every partial index's WHERE), so each one writes an entry in every
-- index whose WHERE the new row meets: these two cost an entry at every insert of a due
-- job, every key front made due, every claim, and did nothing the others cannot do.
-- - crawlq_jobs_ready (queue, run_at) WHERE state = 'ready' answered "the oldest ready
--   run_at of a queue" (job_next_due, queue_stats). The claim index holds the same rows
--   in (queue, priority DESC, run_at, id) order: the oldest of each priority is the first
--   entry of its range, so crawlq_ready_min reads one entry per priority in use.
-- - crawlq_jobs_worker (worker_id) WHERE state = 'running' found a dead worker's jobs
--   (worker_reap). The lease index holds exactly the running jobs, as few as the
--   workers' slots and prefetch; worker_reap reads them there and filters.
-- And the insert trigger no longer matches the key records it wrote against its new
-- waiting jobs to pick the keys to reconcile: planned on the upsert's estimate of one
-- row, that match was a nested loop reading every new job once per key (10,000 keys in one
-- INSERT of 10,000 jobs: 12 s of 15). It passes every key left without front and with
-- room; crawlq_reconcile finds each one's best waiting job by the waiting index, as before.
-- Nothing users see changes. Dropping an index holds crawlq_jobs' ACCESS EXCLUSIVE lock
-- for the moment the catalog change takes (readers and writers wait that long).

-- The earliest run_at of a queue's ready jobs (NULL if none): the first claim-index entry
-- of each priority, highest first.
CREATE OR REPLACE FUNCTION crawlq_ready_min(q text) RETURNS double precision
    LANGUAGE sql STABLE PARALLEL SAFE SET search_path FROM CURRENT AS $$
WITH RECURSIVE firsts AS (
    (SELECT priority, run_at FROM crawlq_jobs
     WHERE queue = q AND state = 'ready'
     ORDER BY priority DESC, run_at, id LIMIT 1)
    UNION ALL
    SELECT next.priority, next.run_at
    FROM firsts CROSS JOIN LATERAL (
        SELECT priority, run_at FROM crawlq_jobs
        WHERE queue = q AND state = 'ready' AND priority < firsts.priority
        ORDER BY priority DESC, run_at, id LIMIT 1
    ) AS next
)
SELECT min(run_at) FROM firsts
$$;

DROP INDEX crawlq_jobs_ready;
DROP INDEX crawlq_jobs_worker;

-- The jobs' insert trigger (0011's), with the keys to reconcile taken as they come.
CREATE OR REPLACE FUNCTION crawlq_jobs_inserted() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    a_free text[];
    at double precision;
BEGIN
    INSERT INTO crawlq_count_deltas (queue, state, n)
    SELECT queue, state, count(*) FROM new_rows GROUP BY queue, state;
    PERFORM pg_notify('crawlq_jobs', TG_TABLE_SCHEMA || ':' || queue)
    FROM (SELECT DISTINCT queue FROM new_rows
          WHERE state IN ('scheduled', 'ready')) AS woken;
    IF NOT EXISTS (SELECT FROM new_rows
                   WHERE crawl_id IS NOT NULL OR limit_key IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT FROM new_rows WHERE crawl_id IS NOT NULL) THEN
        PERFORM FROM crawlq_crawls
        WHERE id IN (SELECT crawl_id FROM new_rows) ORDER BY id FOR UPDATE;
        UPDATE crawlq_crawls AS cr
        SET pending = cr.pending + ch.pending, running = cr.running + ch.running,
            done = cr.done + ch.done, dead = cr.dead + ch.dead,
            cancelled = cr.cancelled + ch.cancelled, changed_at = ch.ended
        FROM (SELECT crawl_id,
                     count(*) FILTER (WHERE state IN ('scheduled', 'ready', 'waiting', 'held'))
                         AS pending,
                     count(*) FILTER (WHERE state = 'running') AS running,
                     count(*) FILTER (WHERE state = 'done') AS done,
                     count(*) FILTER (WHERE state = 'dead') AS dead,
                     count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
                     max(created_at) AS ended
              FROM new_rows WHERE crawl_id IS NOT NULL GROUP BY crawl_id) AS ch
        WHERE cr.id = ch.crawl_id;
    END IF;
    -- A key used for the first time (or only blocked so far) takes its settings from the
    -- crawl of its first new job, else from the queue default, else none. When new jobs
    -- wait, the keys that have no front and room for one are reconciled (a key that has
    -- a front, the common case, costs no call).
    WITH up AS (
        INSERT INTO crawlq_keys AS k (key, max_running, min_interval, source, pending)
        SELECT DISTINCT ON (f.limit_key) f.limit_key,
               CASE WHEN c.limits IS NOT NULL THEN (c.limits ->> 'max_running')::integer
                    ELSE qd.max_running END,
               coalesce(CASE WHEN c.limits IS NOT NULL
                             THEN (c.limits ->> 'min_interval')::double precision
                             ELSE qd.min_interval END, 0),
               'default', f.pending
        FROM (SELECT n.*, count(*) FILTER (WHERE n.state IN ('scheduled', 'ready', 'waiting',
                                                            'held'))
                          OVER (PARTITION BY n.limit_key) AS pending
              FROM new_rows AS n WHERE n.limit_key IS NOT NULL) AS f
        LEFT JOIN crawlq_crawls AS c ON c.id = f.crawl_id
        LEFT JOIN crawlq_limit_defaults AS qd ON qd.queue = f.queue
        ORDER BY f.limit_key, f.id
        ON CONFLICT (crawlq_digest(key)) DO UPDATE
        SET pending = k.pending + excluded.pending,
            max_running = CASE WHEN k.source = 'none' THEN excluded.max_running
                               ELSE k.max_running END,
            min_interval = CASE WHEN k.source = 'none' THEN excluded.min_interval
                                ELSE k.min_interval END,
            source = CASE WHEN k.source = 'none' THEN 'default' ELSE k.source END
        RETURNING k.key, k.front, k.max_running, k.running
    )
    SELECT array_agg(up.key) INTO a_free FROM up
    WHERE up.front IS NULL AND (up.max_running IS NULL OR up.running < up.max_running);
    -- New fronts are due at the caller's instant, the jobs' created_at. (A key whose new
    -- jobs are all held has no waiting job for crawlq_reconcile to find.)
    SELECT max(created_at) INTO at FROM new_rows WHERE state = 'waiting';
    IF a_free IS NOT NULL AND at IS NOT NULL THEN
        PERFORM crawlq_reconcile(a_free, at);
    END IF;
    RETURN NULL;
END $$;

