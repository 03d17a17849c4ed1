-- Totals per queue that only grow (Prometheus counters, crawlq.stores.states.totals_of):
-- enqueued, completed, retried, dead-lettered. They follow from the state counts plus the
-- jobs that left those states without being counted elsewhere, appended to
-- crawlq_count_deltas like every count change (and folded by maintenance):
-- - 'gone_<state>': jobs deleted (pruned, purged) in each internal state;
-- - 'total_retried': failed attempts sent back to pending (the attempt the claim counted
--   is kept; a release gives it back);
-- - 'total_left_dead': dead jobs requeued.
-- Their own statement triggers, so the trigger functions of 0005 stay as they are.

CREATE FUNCTION crawlq_jobs_totals_updated() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO crawlq_count_deltas (queue, state, n)
    SELECT n.queue, CASE WHEN o.state = 'dead' THEN 'total_left_dead'
                         ELSE 'total_retried' END AS total, count(*)
    FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id
    WHERE (o.state = 'running' AND n.attempts >= o.attempts
           AND n.state IN ('scheduled', 'ready', 'waiting', 'held'))
       OR (o.state = 'dead' AND n.state <> 'dead')
    GROUP BY 1, 2;
    RETURN NULL;
END $$;

CREATE FUNCTION crawlq_jobs_totals_deleted() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO crawlq_count_deltas (queue, state, n)
    SELECT queue, 'gone_' || state, count(*) FROM old_rows GROUP BY queue, state;
    RETURN NULL;
END $$;

CREATE TRIGGER crawlq_jobs_totals_updated AFTER UPDATE ON crawlq_jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION crawlq_jobs_totals_updated();

CREATE TRIGGER crawlq_jobs_totals_deleted AFTER DELETE ON crawlq_jobs
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION crawlq_jobs_totals_deleted();
