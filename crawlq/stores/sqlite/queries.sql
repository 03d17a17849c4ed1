-- Queries of the SQLite store. Names are shared with the other SQL stores; bodies are not.
-- Every time is a parameter (:now): the store computes it once per call.

-- name: job_insert
-- A new job; on a live (queue, key) nothing is inserted and no row is returned.
INSERT INTO crawlq_jobs (queue, task, args, kwargs, key, priority, run_at, state,
                         max_attempts, lease_seconds, timeout, created_at)
VALUES (:queue, :task, :args, :kwargs, :key, :priority, :run_at,
        CASE WHEN :run_at <= :now THEN 'ready' ELSE 'scheduled' END,
        :max_attempts, :lease_seconds, :timeout, :now)
ON CONFLICT (queue, key) WHERE key IS NOT NULL AND state IN ('scheduled', 'ready', 'running')
DO NOTHING
RETURNING id;

-- name: job_get_live_by_key
SELECT id, state, priority, run_at, args, kwargs, task, max_attempts, lease_seconds,
       timeout, followup
FROM crawlq_jobs
WHERE queue = :queue AND key = :key AND state IN ('scheduled', 'ready', 'running');

-- name: job_update_pending
UPDATE crawlq_jobs
SET task = :task, args = :args, kwargs = :kwargs, priority = :priority, run_at = :run_at,
    state = CASE WHEN :run_at <= :now THEN 'ready' ELSE 'scheduled' END,
    max_attempts = :max_attempts, lease_seconds = :lease_seconds, timeout = :timeout
WHERE id = :id;

-- name: job_set_followup
UPDATE crawlq_jobs SET followup = :followup WHERE id = :id;

-- name: job_has_due
-- Cheap read-only probe, so that an idle poll never takes the write lock.
SELECT EXISTS (
    SELECT 1 FROM crawlq_jobs WHERE queue = :queue AND state = 'ready' AND run_at <= :now
) OR EXISTS (
    SELECT 1 FROM crawlq_jobs WHERE queue = :queue AND state = 'scheduled' AND run_at <= :now
);

-- name: job_promote_due
UPDATE crawlq_jobs SET state = 'ready'
WHERE queue = :queue AND state = 'scheduled' AND run_at <= :now;

-- name: job_claim_candidates
-- INDEXED BY: the claim index gives claim order with no sort; never let the planner
-- pick the run_at index and sort every due job instead.
SELECT id, priority, run_at FROM crawlq_jobs INDEXED BY crawlq_jobs_claim
WHERE queue = :queue AND state = 'ready' AND run_at <= :now
ORDER BY priority DESC, run_at, id
LIMIT :limit;

-- name: job_claim_ids
UPDATE crawlq_jobs
SET state = 'running', attempts = attempts + 1, worker_id = :worker_id,
    lease_token = lower(hex(randomblob(8))), lease_expires_at = :now + lease_seconds,
    started_at = :now
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'ready'
RETURNING *;

-- name: job_heartbeat
UPDATE crawlq_jobs SET lease_expires_at = :now + lease_seconds
WHERE id = :id AND lease_token = :token AND state = 'running';

-- name: job_complete
UPDATE crawlq_jobs
SET state = 'done', result = :result, finished_at = :now,
    lease_token = NULL, lease_expires_at = NULL
WHERE id = :id AND lease_token = :token AND state = 'running'
RETURNING id, queue, key, followup;

-- name: job_fail
UPDATE crawlq_jobs
SET state = CASE WHEN :retry_delay IS NULL THEN 'dead'
                 WHEN :retry_delay <= 0 THEN 'ready'
                 ELSE 'scheduled' END,
    run_at = CASE WHEN :retry_delay IS NULL THEN run_at ELSE :now + :retry_delay END,
    last_error = :error,
    dead_reason = CASE WHEN :retry_delay IS NULL THEN :reason END,
    finished_at = CASE WHEN :retry_delay IS NULL THEN :now END,
    lease_token = NULL, lease_expires_at = NULL
WHERE id = :id AND lease_token = :token AND state = 'running'
RETURNING id, queue, key, followup, state;

-- name: job_release
UPDATE crawlq_jobs
SET state = CASE WHEN :delay <= 0 THEN 'ready' ELSE 'scheduled' END,
    run_at = CASE WHEN :delay <= 0 THEN run_at ELSE :now + :delay END,
    attempts = attempts - 1,
    lease_token = NULL, lease_expires_at = NULL
WHERE id = :id AND lease_token = :token AND state = 'running';

-- name: job_any_lease_expired
SELECT EXISTS (
    SELECT 1 FROM crawlq_jobs WHERE state = 'running' AND lease_expires_at < :now
);

-- name: job_expire_leases
UPDATE crawlq_jobs
SET state = CASE WHEN attempts < max_attempts THEN 'ready' ELSE 'dead' END,
    last_error = 'lease expired: the worker holding it stopped heartbeating',
    dead_reason = CASE WHEN attempts < max_attempts THEN NULL ELSE 'lease_expired' END,
    finished_at = CASE WHEN attempts < max_attempts THEN NULL ELSE :now END,
    lease_token = NULL, lease_expires_at = NULL
WHERE state = 'running' AND lease_expires_at < :now
RETURNING id, queue, key, followup, state;

-- name: job_cancel
UPDATE crawlq_jobs
SET state = 'cancelled', finished_at = :now, followup = NULL,
    lease_token = NULL, lease_expires_at = NULL
WHERE id IN (SELECT value FROM json_each(:ids))
  AND state IN ('scheduled', 'ready', 'running')
RETURNING id;

-- name: job_get
SELECT * FROM crawlq_jobs WHERE id = :id;

-- name: job_list
SELECT * FROM crawlq_jobs
WHERE id > :after_id
  AND (:ids IS NULL OR id IN (SELECT value FROM json_each(:ids)))
  AND (:queue IS NULL OR queue = :queue)
  AND (:task IS NULL OR task = :task)
  AND (:state IS NULL OR state IN (SELECT value FROM json_each(:state)))
  AND (:finished_before IS NULL OR finished_at < :finished_before)
ORDER BY id
LIMIT :limit;

-- name: job_requeue
UPDATE crawlq_jobs
SET state = 'ready', attempts = 0, run_at = :now, finished_at = NULL, dead_reason = NULL,
    lease_token = NULL, lease_expires_at = NULL, worker_id = NULL,
    followup = NULL  -- spent when the job died: it must not become a job a second time
WHERE id = :id AND state = 'dead'
  AND (key IS NULL OR NOT EXISTS (
        SELECT 1 FROM crawlq_jobs AS live
        WHERE live.queue = crawlq_jobs.queue AND live.key = crawlq_jobs.key
          AND live.state IN ('scheduled', 'ready', 'running')))
RETURNING id;

-- name: job_delete
DELETE FROM crawlq_jobs
WHERE id = :id AND state IN ('done', 'dead', 'cancelled');

-- name: job_prune
DELETE FROM crawlq_jobs
WHERE queue = :queue AND state = :state AND finished_at < :before;

-- name: queue_min_run_at_ready
-- The earliest run_at of the queue's due jobs (an index min, O(log n)).
SELECT min(run_at) FROM crawlq_jobs WHERE queue = :queue AND state = 'ready';

-- name: queue_min_run_at_scheduled
SELECT min(run_at) FROM crawlq_jobs WHERE queue = :queue AND state = 'scheduled';

-- name: queue_counts
SELECT queue, state, n FROM crawlq_counts ORDER BY queue;

-- name: queue_due_unpromoted
SELECT count(*) FROM crawlq_jobs
WHERE queue = :queue AND state = 'scheduled' AND run_at <= :now;

-- name: queue_done_since
SELECT count(*) FROM crawlq_jobs
WHERE queue = :queue AND state = 'done' AND finished_at >= :since;

-- name: migrations_create
CREATE TABLE IF NOT EXISTS crawlq_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at REAL NOT NULL
);

-- name: migrations_applied
SELECT version FROM crawlq_migrations ORDER BY version;

-- name: migrations_record
INSERT INTO crawlq_migrations (version, name, applied_at) VALUES (:version, :name, :now);

-- name: worker_register
INSERT INTO crawlq_workers (id, host, pid, queues, runtime, concurrency, started_at,
                            last_heartbeat, running, done, failed, rss_bytes, state,
                            stopped_at)
VALUES (:id, :host, :pid, :queues, :runtime, :concurrency, :now, :now, :running, :done,
        :failed, :rss_bytes, 'alive', NULL)
ON CONFLICT (id) DO UPDATE
SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
    runtime = excluded.runtime, concurrency = excluded.concurrency,
    started_at = excluded.started_at, last_heartbeat = excluded.last_heartbeat,
    running = excluded.running, done = excluded.done, failed = excluded.failed,
    rss_bytes = excluded.rss_bytes, state = 'alive', stopped_at = NULL;

-- name: worker_heartbeat
UPDATE crawlq_workers
SET last_heartbeat = :now, running = :running, done = :done, failed = :failed,
    rss_bytes = :rss_bytes
WHERE id = :id AND state = 'alive';

-- name: worker_stop
UPDATE crawlq_workers SET state = 'stopped', stopped_at = :now
WHERE id = :id AND state = 'alive';

-- name: worker_list
SELECT * FROM crawlq_workers
ORDER BY state <> 'alive', started_at, id;

-- name: worker_any_overdue
-- Read-only probe, so that the reaper's every look takes no write lock.
SELECT EXISTS (
    SELECT 1 FROM crawlq_workers
    WHERE state = 'alive' AND last_heartbeat < :now - :dead_after
);

-- name: worker_reap
-- Alive workers whose heartbeat is overdue become dead.
UPDATE crawlq_workers SET state = 'dead', stopped_at = :now
WHERE state = 'alive' AND last_heartbeat < :now - :dead_after
RETURNING id;

-- name: job_return_worker_leases
-- The running jobs of a worker declared dead go back as job_expire_leases returns
-- expired leases (same columns, same rows returned), with reason worker_lost.
UPDATE crawlq_jobs
SET state = CASE WHEN attempts < max_attempts THEN 'ready' ELSE 'dead' END,
    last_error = 'worker lost: the worker holding it was declared dead (heartbeat overdue)',
    dead_reason = CASE WHEN attempts < max_attempts THEN NULL ELSE 'worker_lost' END,
    finished_at = CASE WHEN attempts < max_attempts THEN NULL ELSE :now END,
    lease_token = NULL, lease_expires_at = NULL
WHERE worker_id = :worker_id AND state = 'running'
RETURNING id, queue, key, followup, state;

-- name: worker_prune
DELETE FROM crawlq_workers
WHERE state IN ('stopped', 'dead') AND stopped_at < :before;

-- name: maintenance_held_elsewhere
-- Read-only probe: another owner holds the duty and it has not expired.
SELECT EXISTS (
    SELECT 1 FROM crawlq_maintenance
    WHERE duty = :duty AND owner <> :owner AND expires_at > :now
);

-- name: maintenance_acquire
-- A row comes back only if :owner holds the duty now (free, expired, or its own).
INSERT INTO crawlq_maintenance (duty, owner, expires_at) VALUES (:duty, :owner, :now + :ttl)
ON CONFLICT (duty) DO UPDATE
SET owner = excluded.owner, expires_at = excluded.expires_at
WHERE crawlq_maintenance.owner = excluded.owner OR crawlq_maintenance.expires_at <= :now
RETURNING owner;
