-- Dropping a crawl's pending jobs and deleting a crawl (crawl_delete.py).

-- name: crawl_state
SELECT state FROM crawlq_crawls WHERE id = :id;

-- name: crawl_close
UPDATE crawlq_crawls SET state = 'cancelled', finished_at = :now
WHERE id = :id AND state IN ('running', 'paused');

-- name: crawl_cancel_live_jobs
-- Every live job of a crawl being deleted, running ones too (their leases go stale).
UPDATE crawlq_jobs
SET state = 'cancelled', finished_at = :now, followup = NULL,
    lease_token = NULL, lease_expires_at = NULL,
    run_at = coalesce(own_run_at, run_at), own_run_at = NULL
WHERE crawl_id = :id AND state IN ('scheduled', 'ready', 'waiting', 'held', 'running')
RETURNING limit_key;

-- name: crawl_delete_jobs
DELETE FROM crawlq_jobs WHERE crawl_id = :id;

-- name: crawl_delete_results
DELETE FROM crawlq_results WHERE crawl_id = :id;

-- name: crawl_delete_seen
DELETE FROM crawlq_seen WHERE crawl_id = :id;

-- name: crawl_delete_row
DELETE FROM crawlq_crawls WHERE id = :id;
