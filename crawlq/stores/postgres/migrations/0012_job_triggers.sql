-- One statement trigger per event on crawlq_jobs (issue 19); nothing users see changes.
-- An UPDATE of jobs fired three (crawlq_jobs_finish_notify of 0009,
-- crawlq_jobs_totals_updated of 0007, crawlq_jobs_updated), a DELETE two. Their work moves
-- into crawlq_jobs_updated and crawlq_jobs_deleted, in the order the triggers fired (by
-- name: finish notify, totals, then the rest), the totals in the same INSERT as the state
-- counts, and the update trigger reads its changed rows once for what they involve (0011
-- took three looks). No table is rewritten: the migration holds crawlq_jobs' ACCESS
-- EXCLUSIVE lock (DROP TRIGGER: it waits for the statements running on the table and
-- blocks new ones, readers too, until it commits) for the milliseconds that replacing two
-- functions and dropping three triggers take.

-- And a key's new front costs its update trigger less.
-- crawlq_reconcile promotes each key's next waiting job to scheduled or ready by an UPDATE
-- that ran all of crawlq_jobs_updated again: the crawl counters (locked, summed to
-- no change), the key counters, the finish waits, the follow-ups. A statement whose rows
-- are all such promotions (waiting to scheduled or ready, same queue, crawl and limit
-- key) now only appends its state counts (waiting -1, the new state +1: the counts stay
-- exact), wakes its queues, locks its crawls and holds the fronts of a paused crawl, as
-- the general path did for those rows. Every other statement takes the general path,
-- after one more look at its changed rows when it has a crawl or a limit key.

-- The jobs' update trigger (0011's), with the finish notify and the totals first, and
-- the fast path of a key's new front.
CREATE OR REPLACE FUNCTION crawlq_jobs_updated() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    a_keys text[];
    a_pending bigint[];
    a_running bigint[];
    a_started double precision[];
    a_gone bigint[];
    at double precision;
    keyed boolean;
    spawns boolean;
BEGIN
    -- One look at the changed rows says what the statement involves: none (NULL), a
    -- crawl or a limit key, a remembered request to spawn (0011 took one for each).
    SELECT bool_or(crawl_id IS NOT NULL OR limit_key IS NOT NULL),
           bool_or(followup IS NOT NULL AND state IN ('done', 'dead'))
    INTO keyed, spawns
    FROM new_rows;
    IF keyed IS NULL THEN
        RETURN NULL;
    END IF;
    -- A key's new front (crawlq_reconcile: waiting to scheduled or ready, nothing else
    -- that counts changes): the state counts, the wake-up and a paused crawl's hold are
    -- all it needs; the crawl and key counters, finish waits and follow-ups are untouched.
    IF keyed AND NOT EXISTS (
        SELECT FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id
        WHERE NOT (o.state = 'waiting' AND n.state IN ('scheduled', 'ready')
                   AND n.queue = o.queue AND n.limit_key IS NOT NULL
                   AND n.limit_key = o.limit_key
                   AND n.crawl_id IS NOT DISTINCT FROM o.crawl_id)) THEN
        INSERT INTO crawlq_count_deltas (queue, state, n)
        SELECT queue, state, count(*) FROM new_rows GROUP BY queue, state
        UNION ALL
        SELECT queue, 'waiting', -count(*) FROM new_rows GROUP BY queue;
        PERFORM pg_notify('crawlq_jobs', TG_TABLE_SCHEMA || ':' || queue)
        FROM (SELECT DISTINCT queue FROM new_rows) AS woken;
        -- Crawls locked as the general path locks them, so a pause that committed
        -- meanwhile is seen.
        PERFORM FROM crawlq_crawls
        WHERE id IN (SELECT crawl_id FROM new_rows) ORDER BY id FOR UPDATE;
        IF EXISTS (SELECT FROM crawlq_crawls
                   WHERE state = 'paused' AND id IN (SELECT crawl_id FROM new_rows)) THEN
            UPDATE crawlq_jobs AS j
            SET state = 'held', run_at = coalesce(j.own_run_at, j.run_at), own_run_at = NULL
            FROM new_rows AS n
            JOIN crawlq_crawls AS c ON c.id = n.crawl_id
            WHERE j.id = n.id AND c.state = 'paused';
        END IF;
        RETURN NULL;
    END IF;
    -- Finish waits (0009's crawlq_jobs_finish_notify): NOTIFY '<schema>:<id>' for each
    -- registered job that became done, dead or cancelled.
    IF EXISTS (SELECT FROM crawlq_finish_waits) THEN
        PERFORM pg_notify('crawlq_finished', TG_TABLE_SCHEMA || ':' || n.id)
        FROM new_rows AS n
        JOIN old_rows AS o ON o.id = n.id
        JOIN crawlq_finish_waits AS w ON w.job_id = n.id
        WHERE n.state IN ('done', 'dead', 'cancelled')
          AND o.state NOT IN ('done', 'dead', 'cancelled');
    END IF;
    -- State counts, and the totals of 0007's crawlq_jobs_totals_updated (failed attempts
    -- sent back to pending, dead jobs requeued), in one append.
    INSERT INTO crawlq_count_deltas (queue, state, n)
    SELECT queue, state, sum(n)
    FROM (SELECT queue, state, 1 AS n FROM new_rows
          UNION ALL
          SELECT queue, state, -1 AS n FROM old_rows) AS changes
    GROUP BY queue, state
    HAVING sum(n) <> 0
    UNION ALL
    SELECT n.queue, CASE WHEN o.state = 'dead' THEN 'total_left_dead'
                         ELSE 'total_retried' END, count(*)
    FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id
    WHERE (o.state = 'running' AND n.attempts >= o.attempts
           AND n.state IN ('scheduled', 'ready', 'waiting', 'held'))
       OR (o.state = 'dead' AND n.state <> 'dead')
    GROUP BY 1, 2;
    PERFORM pg_notify('crawlq_jobs', TG_TABLE_SCHEMA || ':' || queue)
    FROM (SELECT DISTINCT new_rows.queue
          FROM new_rows JOIN old_rows ON old_rows.id = new_rows.id
          WHERE new_rows.state IN ('scheduled', 'ready')
            AND (old_rows.state NOT IN ('scheduled', 'ready')
                 OR old_rows.run_at <> new_rows.run_at)) AS woken;
    IF keyed THEN
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
    IF NOT spawns THEN
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

-- The jobs' delete trigger (0001's), with 0007's 'gone_<state>' totals in the same INSERT.
CREATE OR REPLACE FUNCTION crawlq_jobs_deleted() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO crawlq_count_deltas (queue, state, n)
    SELECT queue, s.state, s.n
    FROM (SELECT queue, state, count(*) AS n FROM old_rows GROUP BY queue, state) AS g
    CROSS JOIN LATERAL (VALUES (g.state, -g.n), ('gone_' || g.state, g.n)) AS s(state, n);
    RETURN NULL;
END $$;

DROP TRIGGER crawlq_jobs_finish_notify ON crawlq_jobs;
DROP TRIGGER crawlq_jobs_totals_updated ON crawlq_jobs;
DROP TRIGGER crawlq_jobs_totals_deleted ON crawlq_jobs;
DROP FUNCTION crawlq_jobs_finish_notify();
DROP FUNCTION crawlq_jobs_totals_updated();
DROP FUNCTION crawlq_jobs_totals_deleted();
