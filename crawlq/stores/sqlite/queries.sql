-- Queries of the SQLite store. Names are shared with the other SQL stores; bodies are not.
-- Every time is a parameter (:now): the store computes it once per call.
--
-- crawlq_pending_state(paused, keyed, due) is the pending-state rule (held, waiting,
-- ready or scheduled), a Python function the store registers on every connection:
-- crawlq.stores.states.pending_state, which its Python uses too.

-- fragment: claim_order
-- The claim order (siblings: the claim index of migrations/0001_initial.sql, which
-- serves it with no sort, and crawlq.stores.states.claim_order, which merges the jobs
-- claimed from several queues).
priority DESC, run_at, id

-- fragment: paused
-- The job belongs to a paused crawl.
crawl_id IS NOT NULL AND (SELECT state FROM crawlq_crawls WHERE id = crawl_id) = 'paused'

-- fragment: live
-- The job is live (pending or running).
state IN ('scheduled', 'ready', 'waiting', 'held', 'running')

-- fragment: holds_key
-- The job holds its key (if it has one): from its insert until a later job takes the key
-- after it has ended. A live job always holds its key; the key index holds the holders
-- (migrations/0009_key_holders.sql, whose WHERE must read the same), so no change of a
-- job's state rewrites it.
key_released IS NULL

-- fragment: take_back
-- A running job taken back from its worker (lease expired, worker lost): dead with
-- :reason when it has no attempt left, else pending again; :error says why
-- (job_expire_leases, job_return_worker_leases).
state = CASE WHEN attempts >= max_attempts THEN 'dead'
             ELSE crawlq_pending_state({{paused}}, limit_key IS NOT NULL, 1) END,
last_error = :error,
dead_reason = CASE WHEN attempts < max_attempts THEN NULL ELSE :reason END,
finished_at = CASE WHEN attempts < max_attempts THEN NULL ELSE :now END,
lease_token = NULL, lease_expires_at = NULL

-- name: job_insert
-- A new job in :state (the store picks ready, scheduled, waiting or held; a keyed job
-- inserted ready or scheduled is its key's front); on a live (queue, key) nothing is
-- inserted and no row is returned.
INSERT INTO crawlq_jobs (queue, task, args, kwargs, key, priority, run_at, state,
                         max_attempts, lease_seconds, timeout, created_at, crawl_id,
                         limit_key)
VALUES (:queue, :task, :args, :kwargs, :key, :priority, :run_at, :state,
        :max_attempts, :lease_seconds, :timeout, :now, :crawl_id, :limit_key)
ON CONFLICT (queue, key) WHERE key IS NOT NULL AND {{holds_key}}
DO NOTHING
RETURNING id;

-- name: job_insert_rows
-- job_insert for jobs whose keys have no live job (the store checks: job_key_holders; a
-- conflict here is an error, not a merge): the store repeats the row of placeholders
-- once per job (crawlq.stores.sqlite.core.row_batches, which pads a batch with all-NULL
-- rows: they insert nothing). The new ids come back.
INSERT INTO crawlq_jobs (queue, key, task, args, kwargs, priority, run_at, state,
                         max_attempts, lease_seconds, timeout, created_at, crawl_id,
                         limit_key)
SELECT * FROM (VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)) WHERE column1 IS NOT NULL
RETURNING id;

-- name: job_key_holders
-- The jobs that hold the keys of :pairs (a JSON list of [queue, key]), and whether each
-- is live.
SELECT id, queue, key, {{live}} AS live FROM crawlq_jobs
WHERE (queue, key) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]')
                       FROM json_each(:pairs))
  AND key IS NOT NULL AND {{holds_key}};

-- name: job_release_ended_keys
-- The ended jobs that hold the keys of :pairs (a JSON list of [queue, key]) release them
-- for a new holder; the rows of those released come back.
UPDATE crawlq_jobs SET key_released = :now
WHERE (queue, key) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]')
                       FROM json_each(:pairs))
  AND key IS NOT NULL AND {{holds_key}} AND NOT {{live}}
RETURNING id;

-- name: job_get_live_by_key
SELECT id, state, priority, coalesce(own_run_at, run_at) AS run_at, args, kwargs, task,
       max_attempts, lease_seconds, timeout, followup, crawl_id, limit_key
FROM crawlq_jobs
WHERE queue = :queue AND key = :key AND {{holds_key}} AND {{live}};

-- name: job_pending_by_id
-- A pending job as job_update_pending rewrites it (a front by its own run_at).
SELECT id, priority, coalesce(own_run_at, run_at) AS run_at, args, kwargs, task,
       max_attempts, lease_seconds, timeout, crawl_id, limit_key
FROM crawlq_jobs
WHERE id = :id AND state IN ('scheduled', 'ready', 'waiting', 'held');

-- name: job_update_pending
-- A held job stays held; a keyed one goes back behind its key (the store reconciles it).
UPDATE crawlq_jobs
SET task = :task, args = :args, kwargs = :kwargs, priority = :priority, run_at = :run_at,
    state = crawlq_pending_state(state = 'held', limit_key IS NOT NULL, :run_at <= :now),
    own_run_at = NULL,
    max_attempts = :max_attempts, lease_seconds = :lease_seconds, timeout = :timeout
WHERE id = :id
RETURNING limit_key;

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
ORDER BY {{claim_order}}
LIMIT :limit;

-- fragment: claimable
-- The jobs a claim may lease by id: ready ones, and a limit key's waiting jobs next after
-- its front made due in the same call (SQLiteJobs._claim: job_key_next).
state IN ('ready', 'waiting')

-- name: job_key_next
-- A key's waiting jobs next after its front, in claim order, that a claim may lease with
-- it when the key has no gate and room under its cap (SQLiteJobs._claim).
SELECT id, queue, priority, run_at FROM crawlq_jobs INDEXED BY crawlq_jobs_waiting
WHERE limit_key = :key AND state = 'waiting'
ORDER BY {{claim_order}}
LIMIT :limit;

-- fragment: claim
-- What a claim writes on the jobs it leases. A waiting job was due at its key's last
-- start, now, as a front is (limit_fronts_due).
SET state = 'running', attempts = attempts + 1, worker_id = :worker_id,
    lease_token = lower(hex(randomblob(8))), lease_expires_at = :now + lease_seconds,
    started_at = :now, own_run_at = NULL,
    run_at = CASE WHEN state = 'waiting' THEN max(run_at, :now) ELSE run_at END

-- name: job_claim_ids
UPDATE crawlq_jobs
{{claim}}
WHERE id IN (SELECT value FROM json_each(:ids)) AND {{claimable}}
RETURNING *;

-- name: job_claim_ids_one
-- job_claim_ids for one job (:id). A query named x_one is query x for one row, with the
-- row's values as parameters (crawlq.stores.sqlite.core.listed says when it is used).
UPDATE crawlq_jobs
{{claim}}
WHERE id = :id AND {{claimable}}
RETURNING *;

-- name: job_heartbeat
UPDATE crawlq_jobs SET lease_expires_at = :now + lease_seconds
WHERE id = :id AND lease_token = :token AND state = 'running';

-- fragment: ends
-- Where one statement ends a batch of leases (SQLiteJobs._end): the jobs of e, the
-- statement's rows of :ends (a JSON list, one [id, token, ...] per lease, no id twice:
-- the store cuts a batch before an id it holds, as SQLite would join one row to both),
-- that still hold their lease.
WHERE crawlq_jobs.id = e.job_id AND crawlq_jobs.lease_token = e.token
  AND crawlq_jobs.state = 'running'
{{ended}}

-- fragment: ended
-- What a statement that ends leases returns of each job it ended.
RETURNING id, queue, key, followup, state, crawl_id, limit_key

-- name: job_complete
UPDATE crawlq_jobs
SET state = 'done', result = e.result, finished_at = :now,
    lease_token = NULL, lease_expires_at = NULL
FROM (SELECT json_extract(value, '$[0]') AS job_id, json_extract(value, '$[1]') AS token,
             json_extract(value, '$[2]') AS result
      FROM json_each(:ends)) AS e
{{ends}};

-- name: job_complete_one
-- job_complete for one lease (:id, :token, :result), as job_claim_ids_one.
UPDATE crawlq_jobs
SET state = 'done', result = :result, finished_at = :now,
    lease_token = NULL, lease_expires_at = NULL
WHERE id = :id AND lease_token = :token AND state = 'running'
{{ended}};

-- name: job_fail
-- A retry_delay of null sends the job to dead. A job that is pending again is held in a
-- paused crawl and waits behind its limit key.
UPDATE crawlq_jobs
SET state = CASE WHEN e.retry_delay IS NULL THEN 'dead'
                 ELSE crawlq_pending_state({{paused}}, limit_key IS NOT NULL,
                                           e.retry_delay <= 0) END,
    run_at = CASE WHEN e.retry_delay IS NULL THEN run_at ELSE :now + e.retry_delay END,
    last_error = e.error,
    dead_reason = CASE WHEN e.retry_delay IS NULL THEN e.reason END,
    finished_at = CASE WHEN e.retry_delay IS NULL THEN :now END,
    lease_token = NULL, lease_expires_at = NULL
FROM (SELECT json_extract(value, '$[0]') AS job_id, json_extract(value, '$[1]') AS token,
             json_extract(value, '$[2]') AS error, json_extract(value, '$[3]') AS retry_delay,
             json_extract(value, '$[4]') AS reason
      FROM json_each(:ends)) AS e
{{ends}};

-- name: job_release
UPDATE crawlq_jobs
SET state = crawlq_pending_state({{paused}}, limit_key IS NOT NULL, :delay <= 0),
    run_at = CASE WHEN :delay <= 0 THEN run_at ELSE :now + :delay END,
    attempts = attempts - 1,
    lease_token = NULL, lease_expires_at = NULL
WHERE id = :id AND lease_token = :token AND state = 'running'
RETURNING id, crawl_id, limit_key;

-- name: job_any_lease_expired
SELECT EXISTS (
    SELECT 1 FROM crawlq_jobs WHERE state = 'running' AND lease_expires_at < :now
);

-- name: job_expire_leases
-- (:error and :reason as the store gives them: the lease expired.)
UPDATE crawlq_jobs
SET {{take_back}}
WHERE state = 'running' AND lease_expires_at < :now
RETURNING id, queue, key, followup, state, crawl_id, limit_key;

-- name: job_cancel
UPDATE crawlq_jobs
SET state = 'cancelled', finished_at = :now, followup = NULL,
    lease_token = NULL, lease_expires_at = NULL,
    run_at = coalesce(own_run_at, run_at), own_run_at = NULL
WHERE id IN (SELECT value FROM json_each(:ids))
  AND state IN ('scheduled', 'ready', 'waiting', 'held', 'running')
RETURNING id, crawl_id, limit_key;

-- name: job_get
SELECT * FROM crawlq_jobs WHERE id = :id;

-- name: job_list
SELECT * FROM crawlq_jobs
WHERE id > :after_id
  AND (:ids IS NULL OR id IN (SELECT value FROM json_each(:ids)))
  AND (:queue IS NULL OR queue = :queue)
  AND (:task IS NULL OR task = :task)
  AND (:key IS NULL OR key = :key)
  AND (:crawl IS NULL OR crawl_id = :crawl)
  AND (:limit_key IS NULL OR limit_key = :limit_key)
  AND (:state IS NULL OR state IN (SELECT value FROM json_each(:state)))
  AND (:finished_before IS NULL OR finished_at < :finished_before)
ORDER BY id
LIMIT :limit;

-- name: job_recent
-- The last finished jobs of some queues, from the finish-time index of each queue.
SELECT * FROM crawlq_jobs
WHERE queue IN (SELECT value FROM json_each(:queues))
  AND state IN ('done', 'dead', 'cancelled')
ORDER BY finished_at DESC, id DESC
LIMIT :limit;

-- name: job_requeue
-- A dead job of a closed crawl stays dead; one of a paused crawl is held; a keyed one
-- waits behind its limit key (the store reconciles it). A dead job whose key another job
-- holds stays dead (the store first releases the key of an ended holder:
-- job_release_ended_keys); else it holds its key again.
UPDATE crawlq_jobs
SET state = crawlq_pending_state({{paused}}, limit_key IS NOT NULL, 1),
    attempts = 0, run_at = :now, finished_at = NULL, dead_reason = NULL,
    lease_token = NULL, lease_expires_at = NULL, worker_id = NULL, key_released = NULL,
    followup = NULL  -- spent when the job died: it must not become a job a second time
WHERE id = :id AND state = 'dead'
  AND (key IS NULL OR NOT EXISTS (
        SELECT 1 FROM crawlq_jobs AS holder  -- (the holds_key test reads holder's column)
        WHERE holder.queue = crawlq_jobs.queue AND holder.key = crawlq_jobs.key
          AND holder.id <> crawlq_jobs.id AND {{holds_key}}))
  AND (crawl_id IS NULL OR EXISTS (
        SELECT 1 FROM crawlq_crawls AS c
        WHERE c.id = crawlq_jobs.crawl_id AND c.state IN ('running', 'paused')))
RETURNING id, limit_key;

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

-- name: job_next_gated
-- The earliest run_at up to :until of the queue's key fronts that are due by their own
-- run_at and kept back by their key's gate (own_run_at is set only then): an index range.
SELECT run_at FROM crawlq_jobs INDEXED BY crawlq_jobs_scheduled
WHERE queue = :queue AND state = 'scheduled' AND run_at <= :until
  AND own_run_at IS NOT NULL AND own_run_at <= :now
ORDER BY run_at
LIMIT 1;

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
INSERT INTO crawlq_workers (id, host, pid, process, queues, runtime, concurrency,
                            started_at, last_heartbeat, running, done, failed, rss_bytes,
                            state, stopped_at)
VALUES (:id, :host, :pid, :process, :queues, :runtime, :concurrency, :now, :now, :running,
        :done, :failed, :rss_bytes, 'alive', NULL)
ON CONFLICT (id) DO UPDATE
SET host = excluded.host, pid = excluded.pid, process = excluded.process,
    queues = excluded.queues, runtime = excluded.runtime,
    concurrency = excluded.concurrency, started_at = excluded.started_at,
    last_heartbeat = excluded.last_heartbeat, running = excluded.running,
    done = excluded.done, failed = excluded.failed, rss_bytes = excluded.rss_bytes,
    state = 'alive', stopped_at = NULL;

-- name: worker_heartbeat
UPDATE crawlq_workers
SET last_heartbeat = :now, running = :running, done = :done, failed = :failed,
    rss_bytes = :rss_bytes
WHERE id = :id AND state = 'alive';

-- name: worker_stop
UPDATE crawlq_workers
SET state = 'stopped', stopped_at = :now, running = 0, done = :done, failed = :failed
WHERE id = :id AND state = 'alive';

-- name: worker_list
-- Sorted (and lost ones told apart) in Python: crawlq.stores.workers.listed.
SELECT * FROM crawlq_workers;

-- name: worker_any_overdue
-- Read-only probe, so that the reaper's every look takes no write lock.
SELECT EXISTS (
    SELECT 1 FROM crawlq_workers
    WHERE state = 'alive' AND last_heartbeat < :now - :dead_after
);

-- name: worker_reap
-- Alive workers whose heartbeat is overdue, or named gone (a JSON list of ids), become
-- dead.
UPDATE crawlq_workers SET state = 'dead', stopped_at = :now
WHERE state = 'alive'
  AND (last_heartbeat < :now - :dead_after OR id IN (SELECT value FROM json_each(:gone)))
RETURNING id;

-- name: job_return_worker_leases
-- The running jobs of a worker declared dead go back as job_expire_leases returns
-- expired leases (same columns, same rows returned), with reason worker_lost.
UPDATE crawlq_jobs
SET {{take_back}}
WHERE worker_id = :worker_id AND state = 'running'
RETURNING id, queue, key, followup, state, crawl_id, limit_key;

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

-- name: crawl_insert
INSERT INTO crawlq_crawls (name, meta, state, limits, created_at)
VALUES (:name, :meta, 'running', :limits, :now)
RETURNING id;

-- name: crawl_set_on_finish
UPDATE crawlq_crawls SET on_finish = :on_finish WHERE id = :id;

-- name: crawl_get
SELECT * FROM crawlq_crawls WHERE id = :id;

-- name: crawl_list
SELECT * FROM crawlq_crawls
WHERE id > :after_id AND (:state IS NULL OR state = :state)
ORDER BY id
LIMIT :limit;

-- name: crawl_finish
-- Finishes an open crawl with nothing outstanding: at most once, atomic with its counters.
UPDATE crawlq_crawls SET state = 'finished', finished_at = :now
WHERE id = :id AND state IN ('running', 'paused') AND pending = 0 AND running = 0
RETURNING on_finish;

-- name: crawl_set_on_finish_job
UPDATE crawlq_crawls SET on_finish_job = :job_id WHERE id = :id;

-- name: crawl_set_state
UPDATE crawlq_crawls
SET state = :state, finished_at = CASE WHEN :state = 'cancelled' THEN :now END
WHERE id = :id AND state IN (SELECT value FROM json_each(:from_states))
RETURNING id;

-- name: crawl_hold_jobs
-- Pause: the crawl's pending jobs leave the claim index; a front gets its own run_at back.
UPDATE crawlq_jobs
SET state = 'held', run_at = coalesce(own_run_at, run_at), own_run_at = NULL
WHERE crawl_id = :id AND state IN ('scheduled', 'ready', 'waiting', 'held')
  AND state <> 'held'
RETURNING limit_key;

-- name: crawl_unhold_jobs
UPDATE crawlq_jobs
SET state = crawlq_pending_state(0, limit_key IS NOT NULL, run_at <= :now)
WHERE crawl_id = :id AND state IN ('scheduled', 'ready', 'waiting', 'held')
  AND state = 'held'
RETURNING limit_key;

-- name: crawl_cancel_jobs
UPDATE crawlq_jobs
SET state = 'cancelled', finished_at = :now, followup = NULL,
    run_at = coalesce(own_run_at, run_at), own_run_at = NULL
WHERE crawl_id = :id AND state IN ('scheduled', 'ready', 'waiting', 'held')
RETURNING limit_key;

-- name: seen_insert
-- A row comes back only if the fingerprint was new (a trigger counts it in the crawl).
INSERT INTO crawlq_seen (crawl_id, fp) VALUES (:crawl_id, :fp)
ON CONFLICT DO NOTHING
RETURNING 1;

-- name: seen_insert_rows
-- seen_insert for many (crawl_id, fp) pairs, its row of placeholders repeated as in
-- job_insert_rows: the pairs that were new come back (a pair given twice, once).
INSERT INTO crawlq_seen (crawl_id, fp)
SELECT * FROM (VALUES (?, ?)) WHERE column1 IS NOT NULL
ON CONFLICT DO NOTHING
RETURNING crawl_id, fp;

-- name: seen_has
-- A row only if the crawl's seen set holds the fingerprint.
SELECT 1 FROM crawlq_seen WHERE crawl_id = :crawl_id AND fp = :fp;

-- name: limit_record
-- What a job joining the key needs to know: whether its settings are fixed (source), and
-- whether the job may be its front (front, cap, running) and when (the gate).
SELECT source, front, max_running, running, min_interval, last_start, blocked_until
FROM crawlq_limits WHERE key = :key;

-- name: limit_ensure
-- Fix the settings of a key used by a job: from its crawl's limits (:from_crawl), else the
-- queue default, else none. A key made by limit_block ('none') takes them too. Returns
-- what limit_record returns.
INSERT INTO crawlq_limits (key, max_running, min_interval, source)
VALUES (:key,
        CASE WHEN :from_crawl THEN :max_running
             ELSE (SELECT max_running FROM crawlq_limit_defaults WHERE queue = :queue) END,
        CASE WHEN :from_crawl THEN :min_interval
             ELSE coalesce((SELECT min_interval FROM crawlq_limit_defaults
                            WHERE queue = :queue), 0) END,
        'default')
ON CONFLICT (key) DO UPDATE
SET max_running = CASE WHEN crawlq_limits.source = 'none' THEN excluded.max_running
                       ELSE crawlq_limits.max_running END,
    min_interval = CASE WHEN crawlq_limits.source = 'none' THEN excluded.min_interval
                        ELSE crawlq_limits.min_interval END,
    source = CASE WHEN crawlq_limits.source = 'none' THEN 'default'
                  ELSE crawlq_limits.source END
RETURNING source, front, max_running, running, min_interval, last_start, blocked_until;

-- fragment: take_front
-- Reconcile, step 1 (limit_take_fronts): a key (crawlq_limits' row) with no front, room
-- under its cap and a waiting job takes its best waiting job, and returns it with the
-- key's gate.
SET front = (SELECT id FROM crawlq_jobs INDEXED BY crawlq_jobs_waiting
             WHERE limit_key = crawlq_limits.key AND state = 'waiting'
             ORDER BY {{claim_order}}
             LIMIT 1)
WHERE front IS NULL AND (max_running IS NULL OR running < max_running)
  AND EXISTS (SELECT 1 FROM crawlq_jobs INDEXED BY crawlq_jobs_waiting
              WHERE limit_key = crawlq_limits.key AND state = 'waiting')

-- fragment: taken_front
RETURNING key, front, min_interval, last_start, blocked_until, max_running, running

-- name: limit_take_fronts
-- Reconcile, step 1, for several keys (a JSON list) in one statement.
UPDATE crawlq_limits
{{take_front}}
  AND key IN (SELECT value FROM json_each(:keys))
{{taken_front}};

-- name: limit_take_fronts_one
-- limit_take_fronts for one key (:key), as job_claim_ids_one.
UPDATE crawlq_limits
{{take_front}}
  AND key = :key
{{taken_front}};

-- fragment: front_due
RETURNING id, queue, priority, run_at, state = 'ready' AS due

-- name: limit_fronts_due
-- Reconcile, step 2: the new fronts (a JSON list of [id, gate]) enter the claim index,
-- each due at its key's gate; a front's own run_at is kept aside when the gate is later.
-- Each front comes back with its claim order, and whether it is due now (ready:
-- claimable at once).
UPDATE crawlq_jobs
SET own_run_at = CASE WHEN f.gate > run_at THEN run_at END,
    run_at = max(run_at, f.gate),
    state = crawlq_pending_state(0, 0, max(run_at, f.gate) <= :now)
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS gate
      FROM json_each(:fronts)) AS f
WHERE crawlq_jobs.id = f.id AND crawlq_jobs.state = 'waiting'
{{front_due}};

-- name: limit_fronts_due_one
-- limit_fronts_due for one front (:id, due at :gate), as job_claim_ids_one.
UPDATE crawlq_jobs
SET own_run_at = CASE WHEN :gate > run_at THEN run_at END,
    run_at = max(run_at, :gate),
    state = crawlq_pending_state(0, 0, max(run_at, :gate) <= :now)
WHERE id = :id AND state = 'waiting'
{{front_due}};

-- name: limit_demote_front
-- The key's front goes back to waiting with its own run_at (the store reconciles it).
UPDATE crawlq_jobs
SET state = 'waiting', run_at = coalesce(own_run_at, run_at), own_run_at = NULL
WHERE id = (SELECT front FROM crawlq_limits WHERE key = :key)
  AND state IN ('scheduled', 'ready');

-- name: limit_set
INSERT INTO crawlq_limits (key, max_running, min_interval, source)
VALUES (:key, :max_running, :min_interval, 'override')
ON CONFLICT (key) DO UPDATE
SET max_running = excluded.max_running, min_interval = excluded.min_interval,
    source = 'override';

-- name: limit_block
INSERT INTO crawlq_limits (key, min_interval, source, blocked_until)
VALUES (:key, 0, 'none', :until)
ON CONFLICT (key) DO UPDATE
SET blocked_until = max(coalesce(crawlq_limits.blocked_until, excluded.blocked_until),
                        excluded.blocked_until);

-- name: limit_default_set
INSERT INTO crawlq_limit_defaults (queue, max_running, min_interval)
VALUES (:queue, :max_running, :min_interval)
ON CONFLICT (queue) DO UPDATE
SET max_running = excluded.max_running, min_interval = excluded.min_interval;

-- name: limit_default_delete
DELETE FROM crawlq_limit_defaults WHERE queue = :queue;

-- name: limit_get
SELECT l.*, f.run_at AS next_start
FROM crawlq_limits AS l LEFT JOIN crawlq_jobs AS f ON f.id = l.front
WHERE l.key = :key;

-- name: limit_list
SELECT l.*, f.run_at AS next_start
FROM crawlq_limits AS l LEFT JOIN crawlq_jobs AS f ON f.id = l.front
WHERE l.key > :after
ORDER BY l.key
LIMIT :limit;

-- name: summary_crawls
SELECT state, count(*) AS n, coalesce(sum(done), 0) AS done, coalesce(sum(dead), 0) AS dead,
       coalesce(sum(cancelled), 0) AS cancelled
FROM crawlq_crawls GROUP BY state;

-- name: summary_keys
SELECT count(*) AS n, coalesce(sum(blocked_until > :now), 0) AS blocked FROM crawlq_limits;

-- name: limit_prune
-- Records that say nothing any more: no job, no override, no block or interval to honour.
DELETE FROM crawlq_limits
WHERE pending = 0 AND running = 0 AND source <> 'override'
  AND coalesce(blocked_until, 0) < :now
  AND coalesce(last_start + min_interval, 0) < :now;

-- name: result_last_seq
-- The crawl's last sequence number, which is also its number of results (0 for none).
SELECT coalesce(max(seq), 0) FROM crawlq_results WHERE crawl_id = :crawl_id;

-- name: result_insert
-- A row comes back only if the key was new to the crawl (its first record stays).
INSERT INTO crawlq_results (crawl_id, key, seq, record)
VALUES (:crawl_id, :key, :seq, :record)
ON CONFLICT (crawl_id, key) DO NOTHING
RETURNING seq;

-- name: result_list
SELECT seq, record FROM crawlq_results
WHERE crawl_id = :crawl_id AND seq > :after
ORDER BY seq
LIMIT :limit;

-- name: result_get
SELECT record FROM crawlq_results WHERE crawl_id = :crawl_id AND key = :key;

-- name: cache_get
SELECT value FROM crawlq_cache WHERE key = :key AND expires_at > :now;

-- name: cache_live
-- Read-only probe: the entry is there and unexpired.
SELECT EXISTS (SELECT 1 FROM crawlq_cache WHERE key = :key AND expires_at > :now);

-- name: cache_set
INSERT INTO crawlq_cache (key, value, expires_at) VALUES (:key, :value, :now + :ttl)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at;

-- name: cache_add
-- A row comes back only if the entry was absent or expired (and is now this one).
INSERT INTO crawlq_cache (key, value, expires_at) VALUES (:key, :value, :now + :ttl)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
WHERE crawlq_cache.expires_at <= :now
RETURNING 1;

-- name: cache_delete
DELETE FROM crawlq_cache WHERE key = :key;

-- name: cache_prune
DELETE FROM crawlq_cache WHERE expires_at <= :now;
