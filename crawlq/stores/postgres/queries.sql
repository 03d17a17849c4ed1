-- Queries of the PostgreSQL store. Names are shared with the other SQL stores; bodies are
-- not. Table names are unqualified: every connection's search_path is the store's schema.
-- Every time is crawlq_now(%(now)s): the caller's instant (tests), else the transaction's
-- start on the server's clock, so one call sees one instant. The triggers of
-- migrations/0001_initial.sql keep the counters, NOTIFY, and turn the remembered request
-- of a job that ends into a new job, in the statement that changes the jobs.
-- crawlq_pending_state(paused, keyed, due) is the pending-state rule (held, waiting,
-- ready or scheduled): migrations/0008_rules.sql.

-- fragment: claim_order
-- The claim order (siblings: the claim index crawlq_jobs_claim of
-- migrations/0001_initial.sql, which serves it with no sort, crawlq_reconcile, which
-- takes a key's front in it, and crawlq.stores.states.claim_order, which merges jobs
-- claimed from several queues).
priority DESC, run_at, id

-- fragment: job_columns
-- The columns of Job. Every query that returns jobs names them (never *, so that a later
-- migration adding a column cannot break a statement prepared before it).
id, queue, task, args, kwargs, key, priority, run_at, state, attempts, max_attempts,
lease_seconds, timeout, worker_id, lease_token, lease_expires_at, last_error,
dead_reason, result, created_at, started_at, finished_at, crawl_id, limit_key

-- fragment: job_filter
-- The conditions of a JobFilter but its states (job_list, job_requeue, job_purge).
id > %(after_id)s
AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
AND (%(task)s::text IS NULL OR task = %(task)s::text)
AND (%(key)s::text IS NULL OR key = %(key)s::text)
AND (%(crawl)s::bigint IS NULL OR crawl_id = %(crawl)s::bigint)
AND (%(limit_key)s::text IS NULL OR limit_key = %(limit_key)s::text)
AND (%(finished_before)s::float8 IS NULL OR finished_at < %(finished_before)s::float8)

-- fragment: take_back
-- A running job taken back from its worker (lease expired, worker lost): dead with
-- %(reason)s when it has no attempt left, else pending again; %(error)s says why
-- (job_expire_leases, worker_reap: crawlq.stores.states.LEASE_EXPIRED, WORKER_LOST).
state = CASE WHEN attempts >= max_attempts THEN 'dead'
             ELSE crawlq_pending_state(false, limit_key IS NOT NULL, true) END,
last_error = %(error)s,
dead_reason = CASE WHEN attempts < max_attempts THEN NULL ELSE %(reason)s END,
finished_at = CASE WHEN attempts < max_attempts THEN NULL ELSE crawlq_now(%(now)s) END,
lease_token = NULL, lease_expires_at = NULL

-- name: session_setup
-- Run on every new connection (pool configure callback). Prepared statements use their
-- generic plan at once: every query here is built around an index, so planning each
-- call anew (the default for the first calls and whenever it looks cheaper) only costs.
SELECT set_config('search_path', quote_ident(%(schema)s), false),
       set_config('plan_cache_mode', 'force_generic_plan', false);

-- name: store_now
SELECT crawlq_now(NULL) AS now;

-- name: schema_create
-- Composed with psycopg.sql.Identifier: the only statement that names the schema.
CREATE SCHEMA IF NOT EXISTS {schema};

-- name: migrations_lock
-- Serialises migrations of one schema across processes, until the transaction ends.
SELECT pg_advisory_xact_lock(1668443249, hashtext(%(schema)s));

-- name: migrations_present
SELECT to_regclass('crawlq_migrations') IS NOT NULL AS present;

-- name: migrations_create
CREATE TABLE IF NOT EXISTS crawlq_migrations (
    version    integer          PRIMARY KEY,
    name       text             NOT NULL,
    applied_at double precision NOT NULL
);

-- name: migrations_applied
SELECT version FROM crawlq_migrations ORDER BY version;

-- name: migrations_record
INSERT INTO crawlq_migrations (version, name, applied_at)
VALUES (%(version)s, %(name)s, extract(epoch FROM now())::double precision);

-- name: job_insert_many
-- New jobs, in input order (ids grow with it). On a live (queue, key), including one
-- inserted earlier in the same input, nothing is inserted: created is false (keys are
-- unique by key_digest, migration 0005, so a key of any length fits). A job of a
-- paused crawl is 'held', one with a limit key 'waiting' (the trigger picks fronts).
-- The jobs come as one JSON list of objects (insert_row in scheduling.py), which costs
-- the client a third of what one array per column did; a NULL column is left out of
-- its object (json_to_recordset reads it as NULL), hold when false.
WITH input AS (
    SELECT nextval('crawlq_jobs_id_seq') AS id, s.*,
           coalesce(s.given_run_at, crawlq_now(%(now)s) + s.delay) AS run_at
    FROM ROWS FROM (json_to_recordset(%(rows)s::json) AS (
             queue text, task text, args json, kwargs json, key text, priority bigint,
             given_run_at float8, delay float8, max_attempts integer, lease_seconds float8,
             timeout float8, crawl_id bigint, limit_key text, hold boolean))
         WITH ORDINALITY AS s(queue, task, args, kwargs, key, priority, given_run_at, delay,
                              max_attempts, lease_seconds, timeout, crawl_id, limit_key,
                              hold, ord)
), inserted AS (
    INSERT INTO crawlq_jobs (id, queue, task, args, kwargs, key, priority, run_at, state,
                             max_attempts, lease_seconds, timeout, created_at, crawl_id,
                             limit_key, key_digest, limit_digest)
    SELECT id, queue, task, args, kwargs, key, priority, run_at,
           crawlq_pending_state(coalesce(hold, false), limit_key IS NOT NULL,
                                run_at <= crawlq_now(%(now)s)),
           max_attempts, lease_seconds, timeout, crawlq_now(%(now)s), crawl_id, limit_key,
           crawlq_digest(key), crawlq_digest(limit_key)
    FROM input
    ORDER BY ord
    {{live_key_conflict}}
    RETURNING id
)
SELECT input.id, inserted.id IS NOT NULL AS created
FROM input LEFT JOIN inserted USING (id)
ORDER BY input.ord;

-- fragment: job_insert_row
-- One job from one parameter per column (job_insert_one, job_insert_crawl_one), held
-- when asked or when its crawl (c) is paused.
INSERT INTO crawlq_jobs (queue, task, args, kwargs, key, priority, run_at, state,
                         max_attempts, lease_seconds, timeout, created_at, crawl_id,
                         limit_key, key_digest, limit_digest)
SELECT %(queue)s::text, %(task)s::text, %(args)s::json, %(kwargs)s::json, %(key)s::text,
       %(priority)s::bigint, s.run_at,
       crawlq_pending_state(%(hold)s::boolean OR c.state = 'paused',
                            %(limit_key)s::text IS NOT NULL, s.run_at <= crawlq_now(%(now)s)),
       %(max_attempts)s::integer, %(lease_seconds)s::float8, %(timeout)s::float8,
       crawlq_now(%(now)s), %(crawl_id)s::bigint, %(limit_key)s::text,
       crawlq_digest(%(key)s::text), crawlq_digest(%(limit_key)s::text)
FROM (SELECT coalesce(%(given_run_at)s::float8, crawlq_now(%(now)s) + %(delay)s::float8)
      AS run_at) AS s

-- fragment: live_key_conflict
-- The arbiter of a job whose (queue, key) is live: nothing is inserted.
ON CONFLICT (queue, key_digest)
    WHERE key IS NOT NULL AND state IN ('scheduled', 'ready', 'waiting', 'held', 'running')
DO NOTHING

-- name: job_insert_one
-- job_insert_many for a single spec with no crawl, with one parameter per column: one
-- row needs no numbering, join or sort, and one call per job is the common case (about
-- half the time of job_insert_many per call). Its id, or no row when its (queue, key) is
-- live.
{{job_insert_row}}
CROSS JOIN (SELECT NULL::text AS state) AS c
{{live_key_conflict}}
RETURNING id, NULL::text AS crawl_state;

-- name: job_insert_crawl_one
-- job_insert_one for a spec of a crawl, which it locks and reads in the same statement
-- (crawl_lock's lock): a job of a paused crawl is held, and one of a closed or unknown
-- crawl is not inserted. One row: the job's id (NULL when its (queue, key) is live or
-- its crawl is not open) and its crawl's state (NULL if there is no such crawl).
WITH crawl AS (
    SELECT state FROM crawlq_crawls WHERE id = %(crawl_id)s::bigint FOR UPDATE
), inserted AS (
    {{job_insert_row}}
    JOIN crawl AS c ON c.state IN ('running', 'paused')
    {{live_key_conflict}}
    RETURNING id
)
SELECT (SELECT id FROM inserted) AS id, (SELECT state FROM crawl) AS crawl_state;

-- name: job_lock_live
-- The live jobs of some (queue, key) pairs, locked for this transaction, and the instant.
SELECT j.id, j.queue, j.key, j.state, j.task, j.args, j.kwargs, j.priority, j.run_at,
       j.own_run_at, j.max_attempts, j.lease_seconds, j.timeout, j.followup, j.crawl_id,
       j.limit_key, crawlq_now(%(now)s) AS now
FROM (SELECT DISTINCT * FROM unnest(%(queue)s::text[], %(key)s::text[])) AS k(queue, key)
JOIN crawlq_jobs AS j
  ON j.queue = k.queue AND j.key_digest = crawlq_digest(k.key) AND j.key = k.key
WHERE j.state IN ('scheduled', 'ready', 'waiting', 'held', 'running')
ORDER BY j.id
FOR UPDATE OF j;

-- name: job_lock_pending
-- Pending jobs among some ids, locked for this transaction, and the instant.
SELECT j.id, j.state, j.task, j.args, j.kwargs, j.priority, j.run_at, j.own_run_at,
       j.max_attempts, j.lease_seconds, j.timeout, j.followup, j.crawl_id, j.limit_key,
       crawlq_now(%(now)s) AS now
FROM crawlq_jobs AS j
WHERE j.id = ANY(%(ids)s::bigint[]) AND j.state IN ('scheduled', 'ready', 'waiting', 'held')
ORDER BY j.id
FOR UPDATE OF j;

-- name: job_update_pending
-- Pending jobs take the requests merged into them (one row per job). Waiting and held
-- jobs stay so; a key's front goes back to waiting, and the trigger re-times it.
UPDATE crawlq_jobs AS j
SET task = u.task, args = u.args::json, kwargs = u.kwargs::json, priority = u.priority,
    run_at = u.run_at, own_run_at = NULL,
    state = crawlq_pending_state(j.state = 'held', j.limit_key IS NOT NULL,
                                 u.run_at <= crawlq_now(%(now)s)),
    max_attempts = u.max_attempts, lease_seconds = u.lease_seconds, timeout = u.timeout
FROM unnest(%(id)s::bigint[], %(task)s::text[], %(args)s::text[], %(kwargs)s::text[],
            %(priority)s::bigint[], %(run_at)s::float8[], %(max_attempts)s::integer[],
            %(lease_seconds)s::float8[], %(timeout)s::float8[])
     AS u(id, task, args, kwargs, priority, run_at, max_attempts, lease_seconds, timeout)
WHERE j.id = ANY(%(id)s::bigint[]) AND j.id = u.id;

-- name: job_set_followup
-- Running jobs remember the requests made for their keys (one row per job).
UPDATE crawlq_jobs AS j
SET followup = u.followup::json
FROM unnest(%(id)s::bigint[], %(followup)s::text[]) AS u(id, followup)
WHERE j.id = ANY(%(id)s::bigint[]) AND j.id = u.id;

-- name: job_claim
-- One statement: up to %(limit)s due jobs of each asked queue, read in claim order from
-- the claim index, plus the scheduled jobs that became due; all locked with SKIP LOCKED
-- (concurrent claimers take the next ones and never wait). The best %(limit)s of them
-- are leased; the other newly due ones join the claim index ('ready').
WITH ready AS (
    SELECT c.id, c.priority, c.run_at
    FROM unnest(%(queues)s::text[]) AS q(queue)
    CROSS JOIN LATERAL (
        SELECT id, priority, run_at FROM crawlq_jobs
        WHERE queue = q.queue AND state = 'ready' AND run_at <= crawlq_now(%(now)s)
        ORDER BY {{claim_order}}
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS c
), due AS (
    SELECT id, priority, run_at FROM crawlq_jobs
    WHERE queue = ANY(%(queues)s::text[]) AND state = 'scheduled'
      AND run_at <= crawlq_now(%(now)s)
    FOR UPDATE SKIP LOCKED
), picked AS (
    SELECT id FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY {{claim_order}}
    LIMIT %(limit)s
), promoted AS (
    UPDATE crawlq_jobs SET state = 'ready'
    WHERE id = ANY(ARRAY(SELECT id FROM due WHERE id NOT IN (SELECT id FROM picked)))
)
UPDATE crawlq_jobs
SET state = 'running', attempts = attempts + 1, worker_id = %(worker_id)s,
    lease_token = gen_random_uuid()::text,
    lease_expires_at = crawlq_now(%(now)s) + lease_seconds,
    started_at = crawlq_now(%(now)s), own_run_at = NULL
WHERE id = ANY(ARRAY(SELECT id FROM picked))
RETURNING {{job_columns}};

-- name: job_heartbeat
-- A lease token is set exactly while a job is running (a CHECK constraint says so), so
-- matching it is the whole fence; the rows are found by primary key.
UPDATE crawlq_jobs AS j
SET lease_expires_at = crawlq_now(%(now)s) + j.lease_seconds
FROM unnest(%(ids)s::bigint[], %(tokens)s::text[]) AS l(id, token)
WHERE j.id = ANY(%(ids)s::bigint[])
  AND j.id = l.id AND j.lease_token = l.token
RETURNING l.id, l.token;

-- name: job_complete
-- (The update trigger turns the remembered requests of the completed jobs into jobs.)
UPDATE crawlq_jobs AS j
SET state = 'done', result = c.result::json, finished_at = crawlq_now(%(now)s),
    lease_token = NULL, lease_expires_at = NULL
FROM unnest(%(ids)s::bigint[], %(tokens)s::text[], %(results)s::text[])
     AS c(id, token, result)
WHERE j.id = ANY(%(ids)s::bigint[])
  AND j.id = c.id AND j.lease_token = c.token
RETURNING c.id, c.token, j.queue, j.key;

-- name: job_fail
UPDATE crawlq_jobs AS j
SET state = CASE WHEN f.retry_delay IS NULL THEN 'dead'
                 ELSE crawlq_pending_state(false, j.limit_key IS NOT NULL,
                                           f.retry_delay <= 0) END,
    run_at = CASE WHEN f.retry_delay IS NULL THEN j.run_at
                  ELSE crawlq_now(%(now)s) + f.retry_delay END,
    last_error = f.error,
    dead_reason = CASE WHEN f.retry_delay IS NULL THEN f.reason END,
    finished_at = CASE WHEN f.retry_delay IS NULL THEN crawlq_now(%(now)s) END,
    lease_token = NULL, lease_expires_at = NULL
FROM unnest(%(ids)s::bigint[], %(tokens)s::text[], %(errors)s::text[],
            %(delays)s::float8[], %(reasons)s::text[])
     AS f(id, token, error, retry_delay, reason)
WHERE j.id = ANY(%(ids)s::bigint[])
  AND j.id = f.id AND j.lease_token = f.token
RETURNING f.id, f.token;

-- name: job_release
UPDATE crawlq_jobs AS j
SET state = crawlq_pending_state(false, j.limit_key IS NOT NULL, r.delay <= 0),
    run_at = CASE WHEN r.delay <= 0 THEN j.run_at ELSE crawlq_now(%(now)s) + r.delay END,
    attempts = j.attempts - 1,
    lease_token = NULL, lease_expires_at = NULL
FROM unnest(%(ids)s::bigint[], %(tokens)s::text[], %(delays)s::float8[])
     AS r(id, token, delay)
WHERE j.id = ANY(%(ids)s::bigint[])
  AND j.id = r.id AND j.lease_token = r.token
RETURNING r.id, r.token;

-- name: job_expire_leases
-- Rows a concurrent heartbeat or completion holds are skipped: they are not expired.
UPDATE crawlq_jobs
SET {{take_back}}
WHERE id = ANY(ARRAY(
    SELECT id FROM crawlq_jobs
    WHERE state = 'running' AND lease_expires_at < crawlq_now(%(now)s)
    FOR UPDATE SKIP LOCKED
))
RETURNING id;

-- name: job_cancel
UPDATE crawlq_jobs
SET state = 'cancelled', finished_at = crawlq_now(%(now)s), followup = NULL,
    lease_token = NULL, lease_expires_at = NULL,
    run_at = coalesce(own_run_at, run_at), own_run_at = NULL
WHERE id = ANY(%(ids)s::bigint[]) AND state IN ('scheduled', 'ready', 'waiting', 'held', 'running')
RETURNING id;

-- name: job_get
SELECT {{job_columns}} FROM crawlq_jobs WHERE id = %(id)s;

-- name: job_list
SELECT {{job_columns}}
FROM crawlq_jobs
WHERE {{job_filter}}
  AND (%(states)s::text[] IS NULL OR state = ANY(%(states)s::text[]))
ORDER BY id
LIMIT %(limit)s;

-- name: job_recent
-- The last finished jobs of some queues, from the finish-time index of each queue.
SELECT {{job_columns}}
FROM crawlq_jobs
WHERE queue = ANY(%(queues)s::text[])
  AND state IN ('done', 'dead', 'cancelled')
ORDER BY finished_at DESC, id DESC
LIMIT %(limit)s;

-- name: job_requeue
-- The matching dead jobs (the filter and its limit as job_list applies them) become
-- pending, due now, with fresh attempts; of several dead jobs with one key only the
-- first, and only if no live job holds the key; a job of a closed crawl stays dead.
WITH candidates AS (
    SELECT id, queue, key FROM crawlq_jobs
    WHERE {{job_filter}} AND state = 'dead'
    ORDER BY id
    LIMIT %(limit)s
), chosen AS (
    SELECT min(id) AS id FROM candidates
    GROUP BY queue, key, CASE WHEN key IS NULL THEN id END
)
UPDATE crawlq_jobs AS j
SET state = crawlq_pending_state(false, j.limit_key IS NOT NULL, true),
    attempts = 0, run_at = crawlq_now(%(now)s), finished_at = NULL,
    dead_reason = NULL, lease_token = NULL, lease_expires_at = NULL, worker_id = NULL,
    followup = NULL  -- spent when the job died: it must not become a job a second time
FROM chosen
WHERE j.id = chosen.id AND j.state = 'dead'
  AND (j.key IS NULL OR NOT EXISTS (
        SELECT 1 FROM crawlq_jobs AS live
        WHERE live.queue = j.queue AND live.key_digest = j.key_digest AND live.key = j.key
          AND live.state IN ('scheduled', 'ready', 'waiting', 'held', 'running')))
  AND (j.crawl_id IS NULL OR EXISTS (
        SELECT 1 FROM crawlq_crawls AS c
        WHERE c.id = j.crawl_id AND c.state IN ('running', 'paused')))
RETURNING j.id;

-- name: job_purge
-- Of the jobs job_list would list, delete the finished ones.
DELETE FROM crawlq_jobs
WHERE state IN ('done', 'dead', 'cancelled')
  AND id = ANY(ARRAY(
    SELECT id FROM crawlq_jobs
    WHERE {{job_filter}}
      AND (%(states)s::text[] IS NULL OR state = ANY(%(states)s::text[]))
    ORDER BY id
    LIMIT %(limit)s
  ));

-- name: job_prune
-- One index range per (queue, finished state): every queue that has jobs has counters.
DELETE FROM crawlq_jobs
WHERE id = ANY(ARRAY(
    SELECT old.id
    FROM (SELECT queue FROM crawlq_counts UNION SELECT queue FROM crawlq_count_deltas) AS q
    CROSS JOIN (VALUES ('done'), ('cancelled')) AS s(state)
    CROSS JOIN LATERAL (
        SELECT id FROM crawlq_jobs
        WHERE queue = q.queue AND state = s.state
          AND finished_at < crawlq_now(%(now)s) - %(retention)s
    ) AS old
));

-- name: job_next_gated
-- The earliest run_at up to now + within of the key fronts of some queues that are due by
-- their own run_at and kept back by their key's gate (own_run_at is set only then): one
-- index range per queue.
SELECT min(first.run_at) AS next_start
FROM unnest(%(queues)s::text[]) AS q(queue)
CROSS JOIN LATERAL (
    SELECT run_at FROM crawlq_jobs
    WHERE queue = q.queue AND state = 'scheduled'
      AND run_at <= crawlq_now(%(now)s) + %(within)s
      AND own_run_at IS NOT NULL AND own_run_at <= crawlq_now(%(now)s)
    ORDER BY run_at
    LIMIT 1
) AS first;

-- name: job_next_due
-- The earliest run_at of the pending jobs of some queues (crawlq_ready_min and an index
-- min per queue), and the store's instant.
SELECT min(first.run_at) AS next_due, crawlq_now(NULL) AS now
FROM unnest(%(queues)s::text[]) AS q(queue)
CROSS JOIN LATERAL (
    SELECT crawlq_ready_min(q.queue) AS run_at
    UNION ALL
    (SELECT run_at FROM crawlq_jobs WHERE queue = q.queue AND state = 'scheduled'
     ORDER BY run_at LIMIT 1)
) AS first;

-- name: listen
LISTEN crawlq_jobs;

-- name: unlisten
UNLISTEN crawlq_jobs;

-- name: queue_totals
-- Every counter (states, and the rows totals_of reads), plus the deltas not folded yet.
SELECT queue, state, sum(n)::bigint AS n
FROM (SELECT queue, state, n FROM crawlq_counts
      UNION ALL
      SELECT queue, state, n FROM crawlq_count_deltas) AS parts
GROUP BY queue, state;

-- name: counts_compact
-- Fold the appended count deltas into the counters; one compactor at a time (the
-- others skip: their deltas wait for the next one).
WITH moved AS (
    DELETE FROM crawlq_count_deltas
    WHERE (SELECT pg_try_advisory_xact_lock(1668443250, hashtext(%(schema)s)))
    RETURNING queue, state, n
)
INSERT INTO crawlq_counts AS c (queue, state, n)
SELECT queue, state, sum(n) FROM moved
GROUP BY queue, state
ORDER BY queue, state
ON CONFLICT (queue, state) DO UPDATE SET n = c.n + excluded.n;

-- name: jobs_statistics
-- Whether the job table was ever analyzed (by hand or by autovacuum) and whether it
-- holds %(rows)s live rows or more (the statistics collector's counts, no scan).
SELECT last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL AS analyzed,
       n_live_tup >= %(rows)s AS big
FROM pg_stat_user_tables WHERE relid = 'crawlq_jobs'::regclass;

-- name: jobs_analyze_lock_timeout
-- ANALYZE would wait for autovacuum's lock on the table: give up after 100 ms instead.
SET LOCAL lock_timeout = '100ms';

-- name: jobs_analyze
ANALYZE crawlq_jobs;

-- name: jobs_dead_rows
-- The job table's dead row versions since its last vacuum and its live rows (the
-- statistics collector's counts, no scan), and whether this role may vacuum it (as its
-- owner or the database's, or a superuser: VACUUM only warns and skips otherwise).
SELECT s.n_dead_tup AS dead, s.n_live_tup AS live,
       pg_has_role(c.relowner, 'USAGE') OR pg_has_role(d.datdba, 'USAGE') AS may_vacuum
FROM pg_stat_user_tables AS s
JOIN pg_class AS c ON c.oid = s.relid
JOIN pg_database AS d ON d.datname = current_database()
WHERE s.relid = 'crawlq_jobs'::regclass;

-- name: jobs_vacuum
-- Not if autovacuum (or another worker) is at it: SKIP_LOCKED returns at once.
VACUUM (SKIP_LOCKED) crawlq_jobs;

-- name: queue_stats
-- Counters (no scan of jobs), plus index range reads per queue: due jobs not promoted
-- yet, the oldest run_at of each pending state, and jobs done in the last minute; and
-- how many count deltas wait to be folded.
WITH totals AS (
    SELECT queue, state, sum(n)::bigint AS n
    FROM (SELECT queue, state, n FROM crawlq_counts
          UNION ALL
          SELECT queue, state, n FROM crawlq_count_deltas) AS parts
    GROUP BY queue, state
), queues AS (
    SELECT queue,
           coalesce(sum(n) FILTER (WHERE state = 'ready'), 0)::bigint AS ready,
           coalesce(sum(n) FILTER (WHERE state = 'scheduled'), 0)::bigint AS scheduled,
           coalesce(sum(n) FILTER (WHERE state = 'waiting'), 0)::bigint AS waiting,
           coalesce(sum(n) FILTER (WHERE state = 'held'), 0)::bigint AS held,
           coalesce(sum(n) FILTER (WHERE state = 'running'), 0)::bigint AS running,
           coalesce(sum(n) FILTER (WHERE state = 'done'), 0)::bigint AS done,
           coalesce(sum(n) FILTER (WHERE state = 'dead'), 0)::bigint AS dead,
           coalesce(sum(n) FILTER (WHERE state = 'cancelled'), 0)::bigint AS cancelled
    FROM totals
    GROUP BY queue
)
SELECT queues.*, crawlq_now(%(now)s) AS now, unpromoted.n AS unpromoted,
       ready_min.run_at AS oldest_ready, scheduled_min.run_at AS oldest_scheduled,
       recent.n AS done_recent, (SELECT count(*) FROM crawlq_count_deltas) AS deltas
FROM queues
CROSS JOIN LATERAL (
    SELECT count(*) AS n FROM crawlq_jobs
    WHERE queue = queues.queue AND state = 'scheduled' AND run_at <= crawlq_now(%(now)s)
) AS unpromoted
CROSS JOIN LATERAL (SELECT crawlq_ready_min(queues.queue) AS run_at) AS ready_min
CROSS JOIN LATERAL (
    SELECT min(run_at) AS run_at FROM crawlq_jobs
    WHERE queue = queues.queue AND state = 'scheduled'
) AS scheduled_min
CROSS JOIN LATERAL (
    SELECT count(*) AS n FROM crawlq_jobs
    WHERE queue = queues.queue AND state = 'done'
      AND finished_at >= crawlq_now(%(now)s) - 60.0
) AS recent
ORDER BY queues.queue;

-- name: worker_register
INSERT INTO crawlq_workers AS w (id, host, pid, process, queues, runtime, concurrency,
                                 started_at, last_heartbeat, running, done, failed,
                                 rss_bytes, state, stopped_at)
VALUES (%(id)s, %(host)s, %(pid)s, %(process)s::text, %(queues)s::text[], %(runtime)s,
        %(concurrency)s, crawlq_now(%(now)s), crawlq_now(%(now)s), %(running)s, %(done)s,
        %(failed)s, %(rss_bytes)s::bigint, 'alive', NULL)
ON CONFLICT (id) DO UPDATE
SET host = excluded.host, pid = excluded.pid, process = excluded.process,
    queues = excluded.queues, runtime = excluded.runtime,
    concurrency = excluded.concurrency, started_at = excluded.started_at,
    last_heartbeat = excluded.last_heartbeat, running = excluded.running,
    done = excluded.done, failed = excluded.failed, rss_bytes = excluded.rss_bytes,
    state = 'alive', stopped_at = NULL;

-- name: worker_heartbeat
UPDATE crawlq_workers
SET last_heartbeat = crawlq_now(%(now)s), running = %(running)s, done = %(done)s,
    failed = %(failed)s, rss_bytes = %(rss_bytes)s::bigint
WHERE id = %(id)s AND state = 'alive';

-- name: worker_stop
UPDATE crawlq_workers
SET state = 'stopped', stopped_at = crawlq_now(%(now)s), running = 0, done = %(done)s,
    failed = %(failed)s
WHERE id = %(id)s AND state = 'alive';

-- name: worker_list
-- Sorted (and lost ones told apart, at listed_at) in Python: crawlq.stores.workers.listed.
SELECT id, host, pid, process, queues, runtime, concurrency, started_at, last_heartbeat,
       running, done, failed, rss_bytes, state, stopped_at,
       crawlq_now(%(now)s) AS listed_at
FROM crawlq_workers;

-- name: worker_reap
-- One statement: alive workers whose heartbeat is overdue, or that the caller names as
-- gone, become dead, and their running jobs (read from the lease index, which holds the
-- running jobs only; locked: a concurrent completion is waited for, and then the job is
-- no longer running) go back as job_expire_leases returns expired leases, with reason
-- worker_lost. The update trigger does the rest, as for expiry.
-- A server that was down took no heartbeat: none is overdue before it has been up for
-- dead_after (on its real clock, so a given now skips this), or every worker would be
-- declared dead after an outage that long and its jobs run twice.
WITH dead AS (
    UPDATE crawlq_workers SET state = 'dead', stopped_at = crawlq_now(%(now)s)
    WHERE state = 'alive'
      AND ((last_heartbeat < crawlq_now(%(now)s) - %(dead_after)s
            AND (%(now)s::double precision IS NOT NULL
                 OR pg_postmaster_start_time() < now() - make_interval(secs => %(dead_after)s)))
           OR id = ANY(%(gone)s::text[]))
    RETURNING id
), returned AS (
    UPDATE crawlq_jobs
    SET {{take_back}}
    WHERE id = ANY(ARRAY(
        SELECT id FROM crawlq_jobs
        WHERE state = 'running' AND worker_id = ANY(ARRAY(SELECT id FROM dead))
        FOR UPDATE
    ))
    RETURNING id
)
SELECT id FROM dead ORDER BY id COLLATE "C";

-- name: worker_prune
DELETE FROM crawlq_workers
WHERE state IN ('stopped', 'dead') AND stopped_at < crawlq_now(%(now)s) - %(older_than)s;

-- name: maintenance_acquire
-- A row comes back only if %(owner)s holds the duty now (free, expired, or its own).
INSERT INTO crawlq_maintenance AS m (duty, owner, expires_at)
VALUES (%(duty)s, %(owner)s, crawlq_now(%(now)s) + %(ttl)s)
ON CONFLICT (duty) DO UPDATE
SET owner = excluded.owner, expires_at = excluded.expires_at
WHERE m.owner = excluded.owner OR m.expires_at <= crawlq_now(%(now)s)
RETURNING owner;

-- name: job_prune_keys
-- Key records nothing refers to any more: no pending or running job, settings not set
-- by limit_set, and neither a block nor an interval still running.
DELETE FROM crawlq_keys
WHERE pending = 0 AND running = 0 AND source <> 'override'
  AND coalesce(blocked_until, '-infinity') < crawlq_now(%(now)s)
  AND coalesce(last_start + min_interval, '-infinity') < crawlq_now(%(now)s);

-- name: crawl_lock
-- The crawls some new jobs name, locked (in id order) so that none closes or pauses
-- before the jobs are in.
SELECT id, state FROM crawlq_crawls WHERE id = ANY(%(ids)s::bigint[]) ORDER BY id FOR UPDATE;

-- name: seen_insert
-- Add fingerprints to seen sets, in input order; the ones that were new come back, and
-- each crawl's seen counter grows by as many.
WITH added AS (
    INSERT INTO crawlq_seen (crawl_id, fp)
    SELECT s.crawl_id, s.fp
    FROM unnest(%(crawl_id)s::bigint[], %(fp)s::bytea[]) WITH ORDINALITY AS s(crawl_id, fp, ord)
    ORDER BY s.ord
    ON CONFLICT (crawl_id, fp) DO NOTHING
    RETURNING crawl_id, fp
), counted AS (
    UPDATE crawlq_crawls AS c SET seen = c.seen + n.n
    FROM (SELECT crawl_id, count(*) AS n FROM added GROUP BY crawl_id) AS n
    WHERE c.id = n.crawl_id
)
SELECT crawl_id, fp FROM added;

-- name: seen_has
-- The crawl (no row if it does not exist) and which of the fingerprints its seen set holds.
SELECT c.id, coalesce(array_agg(s.fp) FILTER (WHERE s.fp IS NOT NULL), '{}') AS known
FROM crawlq_crawls AS c
LEFT JOIN crawlq_seen AS s ON s.crawl_id = c.id AND s.fp = ANY(%(fps)s::bytea[])
WHERE c.id = %(crawl_id)s
GROUP BY c.id;

-- name: crawl_next_id
SELECT nextval('crawlq_crawls_id_seq') AS id, crawlq_now(%(now)s) AS now;

-- name: crawl_insert
INSERT INTO crawlq_crawls (id, name, meta, state, on_finish, limits, created_at, changed_at)
VALUES (%(id)s, %(name)s, %(meta)s::json, 'running', %(on_finish)s::json, %(limits)s::json,
        crawlq_now(%(now)s), crawlq_now(%(now)s));

-- name: constraints_immediate
-- Run the deferred finish now (crawl_create reads the crawl it made).
SET CONSTRAINTS ALL IMMEDIATE;

-- name: crawl_get
SELECT id, name, meta, state, limits, pending, running, done, dead, cancelled, seen,
       created_at, finished_at, on_finish_job
FROM crawlq_crawls WHERE id = %(id)s;

-- name: crawl_list
SELECT id, name, meta, state, limits, pending, running, done, dead, cancelled, seen,
       created_at, finished_at, on_finish_job
FROM crawlq_crawls
WHERE id > %(after_id)s AND (%(state)s::text IS NULL OR state = %(state)s::text)
ORDER BY id
LIMIT %(limit)s;

-- name: crawl_set_state
-- A crawl in one of %(from)s takes %(to)s (finished_at = now when cancelled).
UPDATE crawlq_crawls
SET state = %(to)s::text,
    finished_at = CASE WHEN %(to)s::text = 'cancelled' THEN crawlq_now(%(now)s) END
WHERE id = %(id)s AND state = ANY(%(from)s::text[])
RETURNING id;

-- name: crawl_hold
-- Every pending job of a paused crawl is held (a front gets its own run_at back; the
-- trigger gives its key a new front). Rows another transaction holds are skipped, not
-- waited for: a claim in flight makes them running; the other writers of a crawl's
-- pending jobs lock the crawl row, so the second pass (after crawl_set_state) sees
-- their result. Waiting here would deadlock with claims and acks.
UPDATE crawlq_jobs
SET state = 'held', run_at = coalesce(own_run_at, run_at), own_run_at = NULL
WHERE id = ANY(ARRAY(
    SELECT id FROM crawlq_jobs
    WHERE crawl_id = %(id)s AND state IN ('scheduled', 'ready', 'waiting')
    FOR UPDATE SKIP LOCKED
));

-- name: crawl_unhold
-- Held jobs of a resumed crawl: keyed ones wait for their key, others are pending.
UPDATE crawlq_jobs
SET state = crawlq_pending_state(false, limit_key IS NOT NULL, run_at <= crawlq_now(%(now)s))
WHERE crawl_id = %(id)s AND state = 'held';

-- name: crawl_cancel_jobs
-- (Rows another transaction holds are skipped, as in crawl_hold.)
UPDATE crawlq_jobs
SET state = 'cancelled', finished_at = crawlq_now(%(now)s), followup = NULL,
    run_at = coalesce(own_run_at, run_at), own_run_at = NULL
WHERE id = ANY(ARRAY(
    SELECT id FROM crawlq_jobs
    WHERE crawl_id = %(id)s AND state IN ('scheduled', 'ready', 'waiting', 'held')
    FOR UPDATE SKIP LOCKED
));

-- name: limit_default_set
INSERT INTO crawlq_limit_defaults AS d (queue, max_running, min_interval)
VALUES (%(queue)s, %(max_running)s::integer, %(min_interval)s)
ON CONFLICT (queue) DO UPDATE
SET max_running = excluded.max_running, min_interval = excluded.min_interval;

-- name: limit_default_delete
DELETE FROM crawlq_limit_defaults WHERE queue = %(queue)s;

-- name: limit_set
INSERT INTO crawlq_keys AS k (key, max_running, min_interval, source)
VALUES (%(key)s, %(max_running)s::integer, %(min_interval)s, 'override')
ON CONFLICT (crawlq_digest(key)) DO UPDATE
SET max_running = excluded.max_running, min_interval = excluded.min_interval,
    source = 'override'
RETURNING front;

-- name: limit_block
INSERT INTO crawlq_keys AS k (key, source, blocked_until)
VALUES (%(key)s, 'none', %(until)s)
ON CONFLICT (crawlq_digest(key)) DO UPDATE
SET blocked_until = greatest(k.blocked_until, excluded.blocked_until)
RETURNING front;

-- name: limit_demote
-- A key's front goes back to waiting with its own run_at; the trigger re-times it (or
-- leaves the key without front at its cap).
UPDATE crawlq_jobs
SET state = 'waiting', run_at = coalesce(own_run_at, run_at), own_run_at = NULL
WHERE id = %(id)s AND state IN ('scheduled', 'ready');

-- name: limit_demote_front
UPDATE crawlq_jobs
SET state = 'waiting', run_at = coalesce(own_run_at, run_at), own_run_at = NULL
WHERE id = (SELECT front FROM crawlq_keys WHERE key = %(key)s)
  AND state IN ('scheduled', 'ready');

-- name: limit_reconcile
SELECT crawlq_reconcile(ARRAY[%(key)s::text], crawlq_now(%(now)s));

-- name: limit_get
SELECT k.key, k.max_running, k.min_interval, k.source, k.blocked_until, k.running,
       k.last_start, k.pending, f.run_at AS next_start
FROM crawlq_keys AS k
LEFT JOIN crawlq_jobs AS f ON f.id = k.front
WHERE k.key = ANY(%(keys)s::text[]);

-- name: limit_list
SELECT k.key, k.max_running, k.min_interval, k.source, k.blocked_until, k.running,
       k.last_start, k.pending, f.run_at AS next_start
FROM crawlq_keys AS k
LEFT JOIN crawlq_jobs AS f ON f.id = k.front
WHERE k.key > %(after)s
ORDER BY k.key
LIMIT %(limit)s;

-- name: summary_crawls
SELECT state, count(*) AS n, coalesce(sum(done), 0) AS done, coalesce(sum(dead), 0) AS dead,
       coalesce(sum(cancelled), 0) AS cancelled
FROM crawlq_crawls GROUP BY state;

-- name: summary_keys
SELECT count(*) AS n, count(*) FILTER (WHERE blocked_until > crawlq_now(%(now)s)) AS blocked
FROM crawlq_keys;

-- name: result_lock
-- The crawl's last sequence number, its counter row made if need be and locked until the
-- transaction ends (writers of one crawl take turns); no row if the crawl does not exist.
INSERT INTO crawlq_result_seqs AS s (crawl_id, last_seq)
SELECT id, 0 FROM crawlq_crawls WHERE id = %(crawl_id)s
ON CONFLICT (crawl_id) DO UPDATE SET last_seq = s.last_seq
RETURNING last_seq;

-- name: result_known
-- Which of the keys the crawl already has (the caller holds its counter row).
SELECT key FROM crawlq_results WHERE crawl_id = %(crawl_id)s AND key = ANY(%(keys)s::bytea[]);

-- name: result_insert
INSERT INTO crawlq_results (crawl_id, key, seq, record)
SELECT %(crawl_id)s::bigint, r.key, r.seq, r.record
FROM unnest(%(keys)s::bytea[], %(seqs)s::bigint[], %(records)s::bytea[]) AS r(key, seq, record);

-- name: result_seq_set
UPDATE crawlq_result_seqs SET last_seq = %(last_seq)s WHERE crawl_id = %(crawl_id)s;

-- name: result_list
SELECT seq, record FROM crawlq_results
WHERE crawl_id = %(crawl_id)s AND seq > %(after)s
ORDER BY seq
LIMIT %(limit)s;

-- name: result_get
SELECT key, record FROM crawlq_results
WHERE crawl_id = %(crawl_id)s AND key = ANY(%(keys)s::bytea[]);

-- name: result_count
-- The crawl (none if it does not exist) and its number of results.
SELECT c.id, coalesce(s.last_seq, 0) AS n
FROM crawlq_crawls AS c LEFT JOIN crawlq_result_seqs AS s ON s.crawl_id = c.id
WHERE c.id = %(crawl_id)s;

-- name: cache_get
SELECT value FROM crawlq_cache
WHERE key_hash = %(key_hash)s AND expires_at > crawlq_now(%(now)s);

-- name: cache_set
INSERT INTO crawlq_cache (key_hash, key, value, expires_at)
VALUES (%(key_hash)s, %(key)s, %(value)s, crawlq_now(%(now)s) + %(ttl)s)
ON CONFLICT (key_hash) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at;

-- name: cache_add
-- A row comes back only if the entry was absent or expired (and is now this one).
INSERT INTO crawlq_cache AS c (key_hash, key, value, expires_at)
VALUES (%(key_hash)s, %(key)s, %(value)s, crawlq_now(%(now)s) + %(ttl)s)
ON CONFLICT (key_hash) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
WHERE c.expires_at <= crawlq_now(%(now)s)
RETURNING 1 AS added;

-- name: cache_delete
DELETE FROM crawlq_cache WHERE key_hash = %(key_hash)s;

-- name: cache_prune
DELETE FROM crawlq_cache WHERE expires_at <= crawlq_now(%(now)s);
