-- Unique keys that a job's own life does not rewrite (issue 19). One column is added and
-- one index built again (one pass over the jobs table each).
--
-- The key index of 0003 held the live jobs by `state`, so SQLite rewrote a keyed job's
-- entry at every change of state: its promotion, its claim and its end each wrote a
-- random leaf of the index (keys are URLs), most of what a keyed drain commits beyond a
-- plain one. Now a job holds its key from its insert until a later job takes the key
-- after it has ended (key_released: when that happened, NULL while it holds the key), and
-- the index holds the holders. No column the index reads changes in a job's own life,
-- so its entry is written at its insert and deleted when a later job takes its key or
-- the job is deleted. A live job always holds its key: the store releases an ended
-- holder's key when a new job, a remembered request or a requeued job takes it.
--
-- The jobs that had ended before the upgrade release their keys now (several of them
-- may share one); each live job holds its own.
ALTER TABLE crawlq_jobs ADD COLUMN key_released REAL;
UPDATE crawlq_jobs SET key_released = coalesce(finished_at, created_at)
WHERE key IS NOT NULL AND state IN ('done', 'dead', 'cancelled');

DROP INDEX crawlq_jobs_key;
CREATE UNIQUE INDEX crawlq_jobs_key ON crawlq_jobs (queue, key)
    WHERE key IS NOT NULL AND key_released IS NULL;
