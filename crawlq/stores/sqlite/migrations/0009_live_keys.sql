-- Uniqueness that claims do not rewrite (issue 19). Nothing to copy: one index is built
-- again (one pass over the jobs table).
--
-- The key index of 0003 named `state` in its WHERE, so SQLite rewrote a keyed job's entry
-- at every change of state: its claim, its promotion and its end each wrote a random leaf
-- of the index (keys are URLs), a third of what a keyed drain commits. A live job is one
-- not finished, and finished_at says so without `state`: every statement that ends a job
-- (done, dead, cancelled) sets it, every one that makes a job pending again clears it, and
-- no other column of the index changes. So the entry is written when the job is inserted
-- and deleted when it ends, and nothing in between touches it.
--
-- A job an earlier release left with finished_at out of step with its state is put in
-- step first (no trigger watches finished_at): an ended job without one takes its
-- creation time, a live job with one loses it.
UPDATE crawlq_jobs SET finished_at = created_at
WHERE finished_at IS NULL AND state IN ('done', 'dead', 'cancelled');
UPDATE crawlq_jobs SET finished_at = NULL
WHERE finished_at IS NOT NULL AND state IN ('scheduled', 'ready', 'waiting', 'held', 'running');

DROP INDEX crawlq_jobs_key;
CREATE UNIQUE INDEX crawlq_jobs_key ON crawlq_jobs (queue, key)
    WHERE key IS NOT NULL AND finished_at IS NULL;
