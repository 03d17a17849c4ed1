-- The crawl path's bookkeeping, cheaper per job (issue 19). Nothing to copy: the data
-- stays as it is; an index and two triggers are made again.
--
-- 1. The crawl index holds every job of a crawl, whatever its state. 0003 kept only the
--    pending ones, so every claim of a crawl job (and every front promoted) also deleted
--    its entry; crawl_id never changes, so now no update touches the index: it is written
--    once per job, by the insert. Pause, resume and cancel of a crawl read the crawl's
--    finished jobs too (they skip them by state).
DROP INDEX crawlq_jobs_crawl;
CREATE INDEX crawlq_jobs_crawl ON crawlq_jobs (crawl_id) WHERE crawl_id IS NOT NULL;

-- 2. The update trigger of 0006 with its key-record update guarded: a pending job that
--    stays pending in the claim index (a front made due, a scheduled job promoted)
--    changes none of its key's counters, its last start or its front, so the key's
--    record is no longer rewritten for it.
DROP TRIGGER crawlq_jobs_counts_update;
CREATE TRIGGER crawlq_jobs_counts_update AFTER UPDATE OF state ON crawlq_jobs
WHEN old.state <> new.state
BEGIN
    UPDATE crawlq_counts SET n = n - 1 WHERE queue = old.queue AND state = old.state;
    INSERT INTO crawlq_counts (queue, state, n) VALUES (new.queue, new.state, 1)
        ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
    UPDATE crawlq_crawls
    SET pending = pending + (new.state = 'scheduled' OR new.state = 'ready'
                             OR new.state = 'waiting' OR new.state = 'held')
                          - (old.state = 'scheduled' OR old.state = 'ready'
                             OR old.state = 'waiting' OR old.state = 'held'),
        running = running + (new.state = 'running') - (old.state = 'running'),
        done = done + (new.state = 'done') - (old.state = 'done'),
        dead = dead + (new.state = 'dead') - (old.state = 'dead'),
        cancelled = cancelled + (new.state = 'cancelled') - (old.state = 'cancelled')
    WHERE new.crawl_id IS NOT NULL
      AND NOT ((old.state = 'scheduled' OR old.state = 'ready'
                    OR old.state = 'waiting' OR old.state = 'held')
               AND (new.state = 'scheduled' OR new.state = 'ready'
                    OR new.state = 'waiting' OR new.state = 'held'))
      AND id = new.crawl_id;
    UPDATE crawlq_limits
    SET pending = pending + (new.state = 'scheduled' OR new.state = 'ready'
                             OR new.state = 'waiting' OR new.state = 'held')
                          - (old.state = 'scheduled' OR old.state = 'ready'
                             OR old.state = 'waiting' OR old.state = 'held'),
        running = running + (new.state = 'running') - (old.state = 'running'),
        last_start = CASE WHEN new.state = 'running' THEN new.started_at ELSE last_start END,
        front = CASE WHEN front = new.id AND (new.state <> 'scheduled' AND new.state <> 'ready')
                     THEN NULL ELSE front END
    WHERE new.limit_key IS NOT NULL
      AND NOT ((old.state = 'scheduled' OR old.state = 'ready'
                    OR old.state = 'waiting' OR old.state = 'held')
               AND (new.state = 'scheduled' OR new.state = 'ready'))
      AND key = new.limit_key;
    -- Totals: a failed attempt sent back to pending (it keeps the attempt its claim
    -- counted; a release gives it back), a dead job requeued.
    INSERT INTO crawlq_counts (queue, state, n)
    SELECT new.queue, CASE WHEN old.state = 'dead' THEN 'total_left_dead'
                           ELSE 'total_retried' END, 1
    WHERE (old.state = 'running' AND new.attempts >= old.attempts
           AND (new.state = 'scheduled' OR new.state = 'ready'
                OR new.state = 'waiting' OR new.state = 'held'))
       OR old.state = 'dead'
    ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;

-- 3. The insert trigger of 0003 makes a keyed job inserted ready or scheduled its key's
--    front: the store inserts a job so when its key has no front, room under its cap and
--    no other candidate in the transaction (SQLiteScheduling._insert), instead of
--    inserting it waiting and reconciling the key in two more statements.
DROP TRIGGER crawlq_jobs_counts_insert;
CREATE TRIGGER crawlq_jobs_counts_insert AFTER INSERT ON crawlq_jobs
BEGIN
    INSERT INTO crawlq_counts (queue, state, n) VALUES (new.queue, new.state, 1)
        ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
    UPDATE crawlq_crawls
    SET pending = pending + (new.state = 'scheduled' OR new.state = 'ready'
                             OR new.state = 'waiting' OR new.state = 'held'),
        running = running + (new.state = 'running'),
        done = done + (new.state = 'done'),
        dead = dead + (new.state = 'dead'),
        cancelled = cancelled + (new.state = 'cancelled')
    WHERE new.crawl_id IS NOT NULL AND id = new.crawl_id;
    UPDATE crawlq_limits
    SET pending = pending + (new.state = 'scheduled' OR new.state = 'ready'
                             OR new.state = 'waiting' OR new.state = 'held'),
        running = running + (new.state = 'running'),
        front = CASE WHEN new.state = 'scheduled' OR new.state = 'ready' THEN new.id
                     ELSE front END
    WHERE new.limit_key IS NOT NULL AND key = new.limit_key;
END;
