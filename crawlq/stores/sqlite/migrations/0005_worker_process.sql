-- The identity of a worker's process (boot id, pid namespace, pid, start time; NULL
-- where unknown), so that a worker starting on the same machine can tell that a
-- registered worker's process has gone and reap it at once (crawlq.worker.liveness).

ALTER TABLE crawlq_workers ADD COLUMN process TEXT;
