-- Deleting a crawl (crawl_delete.py); dropping its pending jobs uses crawl_cancel_jobs.

-- name: crawl_cancel_live_jobs
-- Every live job of a crawl being deleted, running ones too (their leases go stale):
-- the jobs first, then (through the triggers) the crawl row and the keys, the order of
-- every writer. Locked rows are waited for: all of them must end.
UPDATE crawlq_jobs
SET state = 'cancelled', finished_at = crawlq_now(%(now)s), followup = NULL,
    lease_token = NULL, lease_expires_at = NULL,
    run_at = coalesce(own_run_at, run_at), own_run_at = NULL
WHERE crawl_id = %(id)s AND state IN ('scheduled', 'ready', 'waiting', 'held', 'running');

-- name: crawl_close
-- Cancelled, so that the deferred finish trigger schedules no on_finish.
UPDATE crawlq_crawls SET state = 'cancelled', finished_at = crawlq_now(%(now)s)
WHERE id = %(id)s AND state IN ('running', 'paused');

-- name: crawl_delete_jobs
DELETE FROM crawlq_jobs WHERE crawl_id = %(id)s;

-- name: crawl_delete_results
DELETE FROM crawlq_results WHERE crawl_id = %(id)s;

-- name: crawl_delete_result_seq
DELETE FROM crawlq_result_seqs WHERE crawl_id = %(id)s;

-- name: crawl_delete_seen
DELETE FROM crawlq_seen WHERE crawl_id = %(id)s;

-- name: crawl_delete_row
DELETE FROM crawlq_crawls WHERE id = %(id)s RETURNING id;
