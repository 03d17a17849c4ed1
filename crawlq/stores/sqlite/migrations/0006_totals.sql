-- Totals per queue that only grow (Prometheus counters, crawlq.stores.states.totals_of):
-- enqueued, completed, retried, dead-lettered. Inserts and completions pay nothing for
-- them: they follow from the state counts plus the jobs that left those states without
-- being counted elsewhere, kept as rows of crawlq_counts:
-- - 'gone_<state>': jobs deleted (pruned, purged) in each internal state;
-- - 'total_retried': failed attempts sent back to pending;
-- - 'total_left_dead': dead jobs requeued.
-- The two triggers are those of 0003 with one statement more each (guarded by its WHERE,
-- so a claim or a completion runs no more than before). 0003 no longer makes the update
-- trigger (see there), hence IF EXISTS.

DROP TRIGGER IF EXISTS crawlq_jobs_counts_update;
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
    WHERE new.limit_key IS NOT NULL AND key = new.limit_key;
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

DROP TRIGGER crawlq_jobs_counts_delete;
CREATE TRIGGER crawlq_jobs_counts_delete AFTER DELETE ON crawlq_jobs
BEGIN
    UPDATE crawlq_counts SET n = n - 1 WHERE queue = old.queue AND state = old.state;
    INSERT INTO crawlq_counts (queue, state, n) VALUES (old.queue, 'gone_' || old.state, 1)
        ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;
