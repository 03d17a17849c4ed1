-- Queries of the SQLite store's periodic schedules (periodic.py). Names are shared with
-- the PostgreSQL store's periodic.sql; bodies are not.

-- name: periodic_definition
SELECT definition FROM crawlq_periodic WHERE name = :name;

-- name: periodic_insert
INSERT INTO crawlq_periodic (name, definition, next_fire, created_at, updated_at)
VALUES (:name, :definition, :next_fire, :now, :now);

-- name: periodic_update
UPDATE crawlq_periodic
SET definition = :definition, revision = revision + 1, next_fire = :next_fire,
    updated_at = :now
WHERE name = :name;

-- name: periodic_get
SELECT p.*, j.state IN ('held', 'ready', 'running', 'scheduled', 'waiting') AS live
FROM crawlq_periodic p LEFT JOIN crawlq_jobs j ON j.id = p.last_job
WHERE p.name = :name;

-- name: periodic_list
SELECT p.*, j.state IN ('held', 'ready', 'running', 'scheduled', 'waiting') AS live
FROM crawlq_periodic p LEFT JOIN crawlq_jobs j ON j.id = p.last_job
ORDER BY p.name;

-- name: periodic_any_due
SELECT 1 FROM crawlq_periodic WHERE paused = 0 AND next_fire <= :now LIMIT 1;

-- name: periodic_due
SELECT p.*, j.state IN ('held', 'ready', 'running', 'scheduled', 'waiting') AS live
FROM crawlq_periodic p LEFT JOIN crawlq_jobs j ON j.id = p.last_job
WHERE p.paused = 0 AND p.next_fire <= :now
ORDER BY p.next_fire, p.name
LIMIT :limit;

-- name: periodic_remove
DELETE FROM crawlq_periodic WHERE name = :name RETURNING name;

-- name: periodic_remove_fires
DELETE FROM crawlq_periodic_fires WHERE name = :name;

-- name: periodic_pause
UPDATE crawlq_periodic SET paused = 1, updated_at = :now WHERE name = :name RETURNING name;

-- name: periodic_resume
UPDATE crawlq_periodic
SET paused = 0, next_fire = :next_fire, updated_at = :now
WHERE name = :name AND paused = 1;

-- name: periodic_exists
SELECT 1 FROM crawlq_periodic WHERE name = :name;

-- name: periodic_claim
-- The check of a planned fire: the schedule moves on only if it is as planned.
UPDATE crawlq_periodic
SET next_fire = :next_fire, last_fire = :fire_at, updated_at = :now
WHERE name = :name AND paused = 0 AND revision = :revision AND next_fire = :fire_at
RETURNING name;

-- name: periodic_record
-- The unique write: nothing if this fire time is in the ledger already.
INSERT INTO crawlq_periodic_fires (name, fire_at, outcome, fired_at)
VALUES (:name, :fire_at, :outcome, :now)
ON CONFLICT (name, fire_at) DO NOTHING
RETURNING name;

-- name: periodic_set_job
UPDATE crawlq_periodic_fires SET job_id = :job_id WHERE name = :name AND fire_at = :fire_at;

-- name: periodic_set_last_job
UPDATE crawlq_periodic SET last_job = :job_id WHERE name = :name;

-- name: periodic_next
SELECT min(next_fire) AS next_fire FROM crawlq_periodic WHERE paused = 0;

-- name: periodic_fires
SELECT * FROM (
    SELECT * FROM crawlq_periodic_fires WHERE name = :name ORDER BY fire_at DESC LIMIT :limit
) ORDER BY fire_at;

-- name: periodic_prune
DELETE FROM crawlq_periodic_fires
WHERE fire_at < :cutoff
  AND fire_at < (SELECT max(f.fire_at) FROM crawlq_periodic_fires f
                 WHERE f.name = crawlq_periodic_fires.name);
