-- Queries of the PostgreSQL store's periodic schedules (periodic.py). Names are shared
-- with the SQLite store's periodic.sql; bodies are not. A fire is set-based: one
-- statement per step for a whole batch of due schedules, locked by the first.

-- name: periodic_definition
SELECT definition FROM crawlq_periodic WHERE name = %(name)s FOR UPDATE;

-- name: periodic_insert
-- Nothing if a concurrent put created it first (the caller retries, then updates).
INSERT INTO crawlq_periodic (name, definition, next_fire, created_at, updated_at)
VALUES (%(name)s, %(definition)s, %(next_fire)s, crawlq_now(%(now)s), crawlq_now(%(now)s))
ON CONFLICT (name) DO NOTHING
RETURNING name;

-- name: periodic_update
UPDATE crawlq_periodic
SET definition = %(definition)s, revision = revision + 1, next_fire = %(next_fire)s,
    updated_at = crawlq_now(%(now)s)
WHERE name = %(name)s;

-- name: periodic_get
SELECT p.*, coalesce(j.state IN ('held', 'ready', 'running', 'scheduled', 'waiting'),
                     false) AS live
FROM crawlq_periodic p LEFT JOIN crawlq_jobs j ON j.id = p.last_job
WHERE p.name = %(name)s;

-- name: periodic_list
SELECT p.*, coalesce(j.state IN ('held', 'ready', 'running', 'scheduled', 'waiting'),
                     false) AS live
FROM crawlq_periodic p LEFT JOIN crawlq_jobs j ON j.id = p.last_job
ORDER BY p.name;

-- name: periodic_due
-- Due schedules, locked: a concurrent scheduler skips them and takes the next ones.
SELECT p.*, coalesce(j.state IN ('held', 'ready', 'running', 'scheduled', 'waiting'),
                     false) AS live,
       crawlq_now(%(now)s) AS now
FROM crawlq_periodic p LEFT JOIN crawlq_jobs j ON j.id = p.last_job
WHERE NOT p.paused AND p.next_fire <= crawlq_now(%(now)s)
ORDER BY p.next_fire, p.name
LIMIT %(limit)s
FOR UPDATE OF p SKIP LOCKED;

-- name: periodic_remove
WITH fires AS (DELETE FROM crawlq_periodic_fires WHERE name = %(name)s)
DELETE FROM crawlq_periodic WHERE name = %(name)s RETURNING name;

-- name: periodic_pause
UPDATE crawlq_periodic SET paused = true, updated_at = crawlq_now(%(now)s)
WHERE name = %(name)s
RETURNING name;

-- name: periodic_resume
-- A row comes back for any existing schedule; only a paused one changes.
WITH changed AS (
    UPDATE crawlq_periodic
    SET paused = false, next_fire = %(next_fire)s, updated_at = crawlq_now(%(now)s)
    WHERE name = %(name)s AND paused
)
SELECT name FROM crawlq_periodic WHERE name = %(name)s;

-- name: periodic_claim
-- The check of planned fires: a schedule (locked by periodic_due) moves on only if it is
-- as planned. Returns the schedules moved on, and whether their fire time is in the
-- ledger already (then the fire does nothing more).
WITH planned AS (
    SELECT * FROM unnest(%(name)s::text[], %(fire_at)s::float8[], %(revision)s::bigint[],
                         %(next_fire)s::float8[])
                  AS f(name, fire_at, revision, next_fire)
), claimed AS (
    UPDATE crawlq_periodic p
    SET next_fire = f.next_fire, last_fire = f.fire_at, updated_at = crawlq_now(%(now)s)
    FROM planned f
    WHERE p.name = f.name AND NOT p.paused AND p.revision = f.revision
      AND p.next_fire = f.fire_at
    RETURNING p.name, f.fire_at
)
SELECT c.name, c.fire_at, x.name IS NOT NULL AS recorded
FROM claimed c
LEFT JOIN crawlq_periodic_fires x ON x.name = c.name AND x.fire_at = c.fire_at;

-- name: periodic_record
-- The unique writes of the fires, with their jobs: a fire time in the ledger already
-- (which the schedule's lock and periodic_claim rule out) is a unique violation that
-- rolls the whole transaction back, jobs included.
WITH fires AS (
    SELECT * FROM unnest(%(name)s::text[], %(fire_at)s::float8[], %(outcome)s::text[],
                         %(job_id)s::bigint[])
                  AS f(name, fire_at, outcome, job_id)
), last AS (
    UPDATE crawlq_periodic p SET last_job = f.job_id
    FROM fires f
    WHERE p.name = f.name AND f.job_id IS NOT NULL
)
INSERT INTO crawlq_periodic_fires (name, fire_at, outcome, job_id, fired_at)
SELECT name, fire_at, outcome, job_id, crawlq_now(%(now)s) FROM fires;

-- name: periodic_next
SELECT min(next_fire) AS next_fire FROM crawlq_periodic WHERE NOT paused;

-- name: periodic_fires
SELECT * FROM (
    SELECT * FROM crawlq_periodic_fires WHERE name = %(name)s
    ORDER BY fire_at DESC LIMIT %(limit)s
) AS latest ORDER BY fire_at;

-- name: periodic_prune
DELETE FROM crawlq_periodic_fires f
WHERE f.fire_at < crawlq_now(%(now)s) - %(older_than)s
  AND f.fire_at < (SELECT max(l.fire_at) FROM crawlq_periodic_fires l WHERE l.name = f.name);
