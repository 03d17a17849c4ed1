-- Waiting for one job to finish (crawlq/stores/postgres/finished.py; the table and the
-- trigger that NOTIFYs are in migrations/0009_finish_waits.sql).

-- name: listen
LISTEN crawlq_finished;

-- name: unlisten
UNLISTEN crawlq_finished;

-- name: register
-- Register a wait (or extend one) and read the job's state in one transaction. FOR SHARE
-- orders it with the statement that finishes the job: one already under way is waited
-- for and its end read here; one that comes after waits for this commit, so its trigger
-- sees the registration and NOTIFYs. Expired registrations are cleared on the way.
WITH gone AS (
    DELETE FROM crawlq_finish_waits
    WHERE until < extract(epoch FROM clock_timestamp()) - %(margin)s
), wait AS (
    INSERT INTO crawlq_finish_waits (job_id, until)
    VALUES (%(id)s, extract(epoch FROM clock_timestamp()) + %(timeout)s)
    ON CONFLICT (job_id) DO UPDATE
    SET until = greatest(crawlq_finish_waits.until, excluded.until)
)
SELECT state FROM crawlq_jobs WHERE id = %(id)s FOR SHARE;
