-- The crawl path in fewer, cheaper statements (issue 19). What a job with a crawl and a
-- limit key cost on top of a plain one was mostly statements that had nothing to do:
-- - crawl counters went through crawlq_crawls_apply, which built a JSON document of the
--   changes and parsed it back; the triggers now count straight from their transition
--   tables (still one UPDATE of each crawl per statement, crawls locked in id order);
-- - crawlq_reconcile ran its UPDATE of crawlq_jobs even with no front to pick (a key that
--   has one: every completion, every new job of a busy key), each such UPDATE firing the
--   update triggers; it now returns at once when it picks nothing, and the insert
--   trigger calls it only for keys left without front and with room (what its upsert of
--   the key records returns);
-- - the update trigger ran the hold of a paused crawl's jobs and spawn_followups as
--   statements with no rows to change (each firing the triggers again); it now runs them
--   only when a paused crawl or a remembered request is involved.
-- - a key's new front, picked by a trigger, was always 'scheduled' (the trigger did not
--   know the caller's instant), so the next claim had to promote it to 'ready' first (one
--   more UPDATE of each crawl job); a trigger now passes the caller's instant that the
--   rows carry (started_at of a claim, finished_at of an end, created_at of new jobs), and
--   a front due then is 'ready' at once (what limit_reconcile already did).
-- And the index of pending jobs by crawl no longer holds every pending job without a crawl.
-- Nothing users see changes: the rules are those of 0008 (crawlq_pending_state, reconcile,
-- spawn_followups), the locks are taken in the same order (jobs, crawls, keys).

-- reconcile (0008's rule, same locks): a key without front and with room takes its best
-- waiting job. Siblings: SQLiteStore._reconcile (sqlite/store.py, queries
-- limit_take_front and limit_front_due) and reconcile in redis/scripts/prelude.lua.
CREATE OR REPLACE FUNCTION crawlq_reconcile(keys text[], now double precision) RETURNS void
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    a_keys text[];
    a_ids bigint[];
    a_run_at double precision[];
    a_gate double precision[];
BEGIN
    WITH k AS (
        SELECT key, min_interval, blocked_until, last_start FROM crawlq_keys
        WHERE key = ANY(keys) AND front IS NULL
          AND (max_running IS NULL OR running < max_running)
        ORDER BY key
        FOR UPDATE
    )
    SELECT array_agg(k.key), array_agg(j.id), array_agg(j.run_at),
           array_agg(greatest(j.run_at, k.last_start + k.min_interval, k.blocked_until))
    INTO a_keys, a_ids, a_run_at, a_gate
    FROM k CROSS JOIN LATERAL (
        SELECT id, run_at FROM crawlq_jobs
        WHERE limit_digest = crawlq_digest(k.key) AND state = 'waiting'
        ORDER BY priority DESC, run_at, id
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) AS j;
    IF a_ids IS NULL THEN
        RETURN;
    END IF;
    UPDATE crawlq_keys AS k SET front = p.id
    FROM unnest(a_keys, a_ids) AS p(key, id)
    WHERE k.key = ANY(a_keys) AND k.key = p.key;
    UPDATE crawlq_jobs AS j
    SET own_run_at = CASE WHEN p.gate > p.run_at THEN p.run_at END,
        run_at = p.gate,
        state = crawlq_pending_state(false, false, p.gate <= now)
    FROM unnest(a_ids, a_run_at, a_gate) AS p(id, run_at, gate)
    WHERE j.id = ANY(a_ids) AND j.id = p.id;
END $$;

-- The jobs' insert trigger: 0001's counters and NOTIFY, then, for jobs with a crawl or a
-- limit key, the crawl counters (straight from new_rows), the key records and the fronts.
CREATE OR REPLACE FUNCTION crawlq_jobs_inserted() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    a_free text[];
BEGIN
    INSERT INTO crawlq_count_deltas (queue, state, n)
    SELECT queue, state, count(*) FROM new_rows GROUP BY queue, state;
    PERFORM pg_notify('crawlq_jobs', TG_TABLE_SCHEMA || ':' || queue)
    FROM (SELECT DISTINCT queue FROM new_rows
          WHERE state IN ('scheduled', 'ready')) AS woken;
    IF NOT EXISTS (SELECT FROM new_rows
                   WHERE crawl_id IS NOT NULL OR limit_key IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT FROM new_rows WHERE crawl_id IS NOT NULL) THEN
        PERFORM FROM crawlq_crawls
        WHERE id IN (SELECT crawl_id FROM new_rows) ORDER BY id FOR UPDATE;
        UPDATE crawlq_crawls AS cr
        SET pending = cr.pending + ch.pending, running = cr.running + ch.running,
            done = cr.done + ch.done, dead = cr.dead + ch.dead,
            cancelled = cr.cancelled + ch.cancelled, changed_at = ch.ended
        FROM (SELECT crawl_id,
                     count(*) FILTER (WHERE state IN ('scheduled', 'ready', 'waiting', 'held'))
                         AS pending,
                     count(*) FILTER (WHERE state = 'running') AS running,
                     count(*) FILTER (WHERE state = 'done') AS done,
                     count(*) FILTER (WHERE state = 'dead') AS dead,
                     count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
                     max(created_at) AS ended
              FROM new_rows WHERE crawl_id IS NOT NULL GROUP BY crawl_id) AS ch
        WHERE cr.id = ch.crawl_id;
    END IF;
    -- A key used for the first time (or only blocked so far) takes its settings from the
    -- crawl of its first new job, else from the queue default, else none. The keys of
    -- new waiting jobs that have no front and room for one are reconciled (a key that
    -- has a front, the common case, costs no call).
    WITH up AS (
        INSERT INTO crawlq_keys AS k (key, max_running, min_interval, source, pending)
        SELECT DISTINCT ON (f.limit_key) f.limit_key,
               CASE WHEN c.limits IS NOT NULL THEN (c.limits ->> 'max_running')::integer
                    ELSE qd.max_running END,
               coalesce(CASE WHEN c.limits IS NOT NULL
                             THEN (c.limits ->> 'min_interval')::double precision
                             ELSE qd.min_interval END, 0),
               'default', f.pending
        FROM (SELECT n.*, count(*) FILTER (WHERE n.state IN ('scheduled', 'ready', 'waiting',
                                                            'held'))
                          OVER (PARTITION BY n.limit_key) AS pending
              FROM new_rows AS n WHERE n.limit_key IS NOT NULL) AS f
        LEFT JOIN crawlq_crawls AS c ON c.id = f.crawl_id
        LEFT JOIN crawlq_limit_defaults AS qd ON qd.queue = f.queue
        ORDER BY f.limit_key, f.id
        ON CONFLICT (crawlq_digest(key)) DO UPDATE
        SET pending = k.pending + excluded.pending,
            max_running = CASE WHEN k.source = 'none' THEN excluded.max_running
                               ELSE k.max_running END,
            min_interval = CASE WHEN k.source = 'none' THEN excluded.min_interval
                                ELSE k.min_interval END,
            source = CASE WHEN k.source = 'none' THEN 'default' ELSE k.source END
        RETURNING k.key, k.front, k.max_running, k.running
    )
    SELECT array_agg(up.key) INTO a_free FROM up
    WHERE up.front IS NULL AND (up.max_running IS NULL OR up.running < up.max_running)
      AND up.key IN (SELECT limit_key FROM new_rows WHERE state = 'waiting');
    IF a_free IS NOT NULL THEN
        -- New fronts are due at the caller's instant, the jobs' created_at.
        PERFORM crawlq_reconcile(a_free, max(created_at))
        FROM new_rows WHERE state = 'waiting';
    END IF;
    RETURN NULL;
END $$;

-- The jobs' update trigger (0008's), its crawl counters counted straight from the
-- transition tables, and its statements that usually change nothing (holding a paused
-- crawl's jobs, spawn_followups) run only when they have something to change.
CREATE OR REPLACE FUNCTION crawlq_jobs_updated() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    a_keys text[];
    a_pending bigint[];
    a_running bigint[];
    a_started double precision[];
    a_gone bigint[];
    at double precision;
BEGIN
    IF NOT EXISTS (SELECT FROM new_rows) THEN
        RETURN NULL;
    END IF;
    INSERT INTO crawlq_count_deltas (queue, state, n)
    SELECT queue, state, sum(n)
    FROM (SELECT queue, state, 1 AS n FROM new_rows
          UNION ALL
          SELECT queue, state, -1 AS n FROM old_rows) AS changes
    GROUP BY queue, state
    HAVING sum(n) <> 0;
    PERFORM pg_notify('crawlq_jobs', TG_TABLE_SCHEMA || ':' || queue)
    FROM (SELECT DISTINCT new_rows.queue
          FROM new_rows JOIN old_rows ON old_rows.id = new_rows.id
          WHERE new_rows.state IN ('scheduled', 'ready')
            AND (old_rows.state NOT IN ('scheduled', 'ready')
                 OR old_rows.run_at <> new_rows.run_at)) AS woken;
    IF EXISTS (SELECT FROM new_rows WHERE crawl_id IS NOT NULL OR limit_key IS NOT NULL) THEN
        -- Crawl counters. Every crawl of a job whose state changed is locked, even
        -- without a net change (a pause holding jobs): locks are then always taken jobs,
        -- crawls, keys in that order.
        PERFORM FROM crawlq_crawls
        WHERE id IN (SELECT n.crawl_id FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id
                     WHERE n.state <> o.state
                     UNION
                     SELECT o.crawl_id FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id
                     WHERE n.state <> o.state)
        ORDER BY id FOR UPDATE;
        UPDATE crawlq_crawls AS cr
        SET pending = cr.pending + ch.pending, running = cr.running + ch.running,
            done = cr.done + ch.done, dead = cr.dead + ch.dead,
            cancelled = cr.cancelled + ch.cancelled,
            changed_at = coalesce(ch.ended, cr.changed_at)
        FROM (
            SELECT x.crawl_id,
                   coalesce(sum(x.n) FILTER (WHERE x.state IN
                       ('scheduled', 'ready', 'waiting', 'held')), 0) AS pending,
                   coalesce(sum(x.n) FILTER (WHERE x.state = 'running'), 0) AS running,
                   coalesce(sum(x.n) FILTER (WHERE x.state = 'done'), 0) AS done,
                   coalesce(sum(x.n) FILTER (WHERE x.state = 'dead'), 0) AS dead,
                   coalesce(sum(x.n) FILTER (WHERE x.state = 'cancelled'), 0) AS cancelled,
                   max(x.finished_at) FILTER (WHERE x.n > 0) AS ended
            FROM (SELECT n.crawl_id, n.state, 1 AS n, n.finished_at
                  FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id
                  WHERE n.crawl_id IS NOT NULL AND n.state <> o.state
                  UNION ALL
                  SELECT o.crawl_id, o.state, -1, o.finished_at
                  FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id
                  WHERE o.crawl_id IS NOT NULL AND n.state <> o.state) AS x
            GROUP BY x.crawl_id
        ) AS ch
        WHERE cr.id = ch.crawl_id
          AND (ch.pending <> 0 OR ch.running <> 0 OR ch.done <> 0 OR ch.dead <> 0
               OR ch.cancelled <> 0);
        -- Jobs of a paused crawl that became pending again (retry, release, expiry,
        -- requeue) or a key's front are held at once (after the counters: the crawl row
        -- is locked, so a pause that committed meanwhile is seen).
        IF EXISTS (SELECT FROM crawlq_crawls
                   WHERE state = 'paused' AND id IN (SELECT crawl_id FROM new_rows)) THEN
            UPDATE crawlq_jobs AS j
            SET state = 'held', run_at = coalesce(j.own_run_at, j.run_at), own_run_at = NULL
            FROM new_rows AS n
            JOIN old_rows AS o ON o.id = n.id
            JOIN crawlq_crawls AS c ON c.id = n.crawl_id
            WHERE j.id = n.id AND c.state = 'paused'
              AND o.state IN ('running', 'dead', 'waiting')
              AND n.state IN ('scheduled', 'ready', 'waiting');
        END IF;
        -- A requeued job's key may have lost its record (job_prune): it takes its
        -- settings as a newly scheduled job would.
        INSERT INTO crawlq_keys AS k (key, max_running, min_interval, source)
        SELECT DISTINCT ON (n.limit_key) n.limit_key,
               CASE WHEN c.limits IS NOT NULL THEN (c.limits ->> 'max_running')::integer
                    ELSE qd.max_running END,
               coalesce(CASE WHEN c.limits IS NOT NULL
                             THEN (c.limits ->> 'min_interval')::double precision
                             ELSE qd.min_interval END, 0),
               'default'
        FROM new_rows AS n
        JOIN old_rows AS o ON o.id = n.id
        LEFT JOIN crawlq_crawls AS c ON c.id = n.crawl_id
        LEFT JOIN crawlq_limit_defaults AS qd ON qd.queue = n.queue
        WHERE n.limit_key IS NOT NULL AND o.state = 'dead' AND n.state <> 'dead'
        ORDER BY n.limit_key, n.id
        ON CONFLICT (crawlq_digest(key)) DO UPDATE
        SET max_running = excluded.max_running, min_interval = excluded.min_interval,
            source = 'default'
        WHERE k.source = 'none';
        -- Keys: running and pending counts, the last start, a front that stopped being
        -- one (records locked first, in key order), then a new front where there is room.
        -- A waiting job rewritten by a merge counts too: a reconcile that found it locked
        -- skipped it.
        -- The new fronts are due at the caller's instant, which a claim wrote as
        -- started_at and an end as finished_at (else NULL: 'scheduled', promoted by the
        -- claim when due): a front due now goes straight to the claim index.
        SELECT array_agg(d.key ORDER BY d.key), array_agg(d.pending ORDER BY d.key),
               array_agg(d.running ORDER BY d.key), array_agg(d.started ORDER BY d.key),
               coalesce(max(d.started), max(d.ended))
        INTO a_keys, a_pending, a_running, a_started, at
        FROM (
            SELECT n.limit_key AS key,
                   count(*) FILTER (WHERE n.state IN ('scheduled', 'ready', 'waiting', 'held'))
                   - count(*) FILTER (WHERE o.state IN ('scheduled', 'ready', 'waiting', 'held'))
                       AS pending,
                   count(*) FILTER (WHERE n.state = 'running')
                   - count(*) FILTER (WHERE o.state = 'running') AS running,
                   max(n.started_at) FILTER (WHERE n.state = 'running') AS started,
                   max(n.finished_at) FILTER (WHERE n.state IN ('done', 'dead', 'cancelled'))
                       AS ended
            FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id
            WHERE n.limit_key IS NOT NULL
              AND (o.state <> n.state OR n.state = 'waiting')
              AND NOT (o.state IN ('scheduled', 'ready', 'waiting')
                       AND n.state IN ('scheduled', 'ready'))
            GROUP BY n.limit_key
        ) AS d;
        IF a_keys IS NOT NULL THEN
            SELECT array_agg(n.id) INTO a_gone
            FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id
            WHERE n.limit_key IS NOT NULL AND o.state IN ('scheduled', 'ready')
              AND n.state NOT IN ('scheduled', 'ready');
            PERFORM FROM crawlq_keys WHERE key = ANY(a_keys) ORDER BY key FOR UPDATE;
            UPDATE crawlq_keys AS k
            SET pending = k.pending + d.pending, running = k.running + d.running,
                last_start = CASE WHEN d.started IS NULL THEN k.last_start
                                  ELSE greatest(k.last_start, d.started) END,
                front = CASE WHEN k.front = ANY(a_gone) THEN NULL ELSE k.front END
            FROM unnest(a_keys, a_pending, a_running, a_started) AS d(key, pending, running, started)
            WHERE k.key = d.key;
            PERFORM crawlq_reconcile(a_keys, at);
        END IF;
    END IF;
    -- spawn_followups: a job that ends turns its remembered request into a new job
    -- (dropped if its key is live again or its crawl closed). Siblings:
    -- SQLiteStore._spawn_followups (sqlite/store.py), spawn_followups in prelude.lua.
    IF NOT EXISTS (SELECT FROM new_rows
                   WHERE followup IS NOT NULL AND state IN ('done', 'dead')) THEN
        RETURN NULL;
    END IF;
    INSERT INTO crawlq_jobs (queue, task, args, kwargs, key, priority, run_at, state,
                             max_attempts, lease_seconds, timeout, created_at, crawl_id,
                             limit_key, key_digest, limit_digest)
    SELECT new_rows.queue, f.task, f.args, f.kwargs, new_rows.key, f.priority, f.run_at,
           crawlq_pending_state(c.state = 'paused', f.limit_key IS NOT NULL,
                                f.run_at <= new_rows.finished_at),
           f.max_attempts, f.lease_seconds, f.timeout, new_rows.finished_at, f.crawl,
           f.limit_key, new_rows.key_digest, crawlq_digest(f.limit_key)
    FROM new_rows
    JOIN old_rows ON old_rows.id = new_rows.id
    CROSS JOIN LATERAL json_to_record(new_rows.followup) AS f(
        task text, args json, kwargs json, priority bigint, run_at double precision,
        max_attempts integer, lease_seconds double precision, timeout double precision,
        crawl bigint, limit_key text)
    LEFT JOIN crawlq_crawls AS c ON c.id = f.crawl
    WHERE old_rows.state = 'running' AND new_rows.state IN ('done', 'dead')
      AND new_rows.followup IS NOT NULL
      AND (f.crawl IS NULL OR c.state IN ('running', 'paused'))
    ORDER BY new_rows.id
    ON CONFLICT (queue, key_digest)
        WHERE key IS NOT NULL AND state IN ('scheduled', 'ready', 'waiting', 'held', 'running')
    DO NOTHING;
    RETURN NULL;
END $$;

DROP FUNCTION crawlq_crawls_apply(json);

-- Pending jobs of a crawl (crawl_hold, crawl_unhold, crawl_cancel_jobs): jobs without a
-- crawl are no longer in it, so a plain job's insert and state changes skip it.
DROP INDEX crawlq_jobs_crawl_pending;
CREATE INDEX crawlq_jobs_crawl_pending ON crawlq_jobs (crawl_id)
    WHERE crawl_id IS NOT NULL AND state IN ('scheduled', 'ready', 'waiting', 'held');
