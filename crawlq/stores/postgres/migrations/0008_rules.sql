-- The rules that the queries and the trigger functions share, each stated once under a
-- name the other stores use too (issue 18), and the functions that stated them inline,
-- now calling them:
-- - crawlq_pending_state: the pending-state rule (held, waiting, ready, scheduled);
-- - crawlq_reconcile: a limit key without front takes its best waiting job;
-- - crawlq_jobs_updated: spawn_followups, an ended job's remembered request as a job;
-- - crawlq_crawl_finish: crawl_finish, a crawl with nothing outstanding finishes.
-- The last three are those of 0005 with the inline rule replaced by a call. Their
-- earlier bodies (0003, 0005) were taken out of those files: a schema migrating from
-- before 0003 runs every migration in one transaction and ends with these bodies, as a
-- schema that already ran the old ones does (tests/migration checks both).

-- The pending-state rule: where a job that is (again) pending waits. Held in a paused
-- crawl, else waiting behind its limit key (reconcile picks the key's front), else ready
-- when due (in the claim index), else scheduled; a NULL counts as false. Plain SQL and
-- IMMUTABLE, so the planner inlines it. Siblings: crawlq.stores.states.pending_state (the
-- SQLite store and its queries) and place in redis/scripts/prelude.lua.
CREATE FUNCTION crawlq_pending_state(paused boolean, keyed boolean, due boolean)
    RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE WHEN paused THEN 'held' WHEN keyed THEN 'waiting'
                      WHEN due THEN 'ready' ELSE 'scheduled' END $$;

-- reconcile: the front of each key that has none and room to start a job, its best
-- waiting job in claim order (the index crawlq_jobs_waiting), due at max(run_at,
-- last_start + min_interval, blocked_until) (its own run_at kept in own_run_at when
-- later). ``now`` NULL (a trigger) makes it 'scheduled': the claim promotes it when due,
-- as any scheduled job. Siblings: SQLiteStore._reconcile (sqlite/store.py, queries
-- limit_take_front and limit_front_due) and reconcile in redis/scripts/prelude.lua.
CREATE OR REPLACE FUNCTION crawlq_reconcile(keys text[], now double precision) RETURNS void
    LANGUAGE sql SET search_path FROM CURRENT AS $$
    WITH k AS (
        SELECT key, min_interval, blocked_until, last_start FROM crawlq_keys
        WHERE key = ANY(keys) AND front IS NULL
          AND (max_running IS NULL OR running < max_running)
        ORDER BY key
        FOR UPDATE
    ), pick AS (
        SELECT k.key, j.id, j.run_at,
               greatest(j.run_at, k.last_start + k.min_interval, k.blocked_until) AS gate
        FROM k CROSS JOIN LATERAL (
            SELECT id, run_at FROM crawlq_jobs
            WHERE limit_digest = crawlq_digest(k.key) AND state = 'waiting'
            ORDER BY priority DESC, run_at, id
            LIMIT 1
            FOR UPDATE SKIP LOCKED
        ) AS j
    ), fronts AS (
        UPDATE crawlq_keys SET front = pick.id FROM pick WHERE crawlq_keys.key = pick.key
    )
    UPDATE crawlq_jobs AS j
    SET own_run_at = CASE WHEN pick.gate > pick.run_at THEN pick.run_at END,
        run_at = pick.gate,
        state = crawlq_pending_state(false, false, pick.gate <= now)
    FROM pick WHERE j.id = pick.id;
$$;

-- The jobs' update trigger (0005's, with crawlq_pending_state in spawn_followups).
CREATE OR REPLACE FUNCTION crawlq_jobs_updated() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    a_keys text[];
    a_pending bigint[];
    a_running bigint[];
    a_started double precision[];
    a_gone bigint[];
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
        PERFORM crawlq_crawls_apply(json_agg(json_build_object(
            'crawl_id', x.crawl_id, 'state', x.state, 'n', x.n, 'finished_at', x.finished_at)))
        FROM (SELECT n.crawl_id, n.state, 1 AS n, n.finished_at
              FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id
              WHERE n.crawl_id IS NOT NULL AND n.state <> o.state
              UNION ALL
              SELECT o.crawl_id, o.state, -1, o.finished_at
              FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id
              WHERE o.crawl_id IS NOT NULL AND n.state <> o.state) AS x;
        -- Jobs of a paused crawl that became pending again (retry, release, expiry,
        -- requeue) or a key's front are held at once (after the counters: the crawl row
        -- is locked, so a pause that committed meanwhile is seen).
        UPDATE crawlq_jobs AS j
        SET state = 'held', run_at = coalesce(j.own_run_at, j.run_at), own_run_at = NULL
        FROM new_rows AS n
        JOIN old_rows AS o ON o.id = n.id
        JOIN crawlq_crawls AS c ON c.id = n.crawl_id
        WHERE j.id = n.id AND c.state = 'paused'
          AND o.state IN ('running', 'dead', 'waiting')
          AND n.state IN ('scheduled', 'ready', 'waiting');
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
        SELECT array_agg(d.key ORDER BY d.key), array_agg(d.pending ORDER BY d.key),
               array_agg(d.running ORDER BY d.key), array_agg(d.started ORDER BY d.key)
        INTO a_keys, a_pending, a_running, a_started
        FROM (
            SELECT n.limit_key AS key,
                   count(*) FILTER (WHERE n.state IN ('scheduled', 'ready', 'waiting', 'held'))
                   - count(*) FILTER (WHERE o.state IN ('scheduled', 'ready', 'waiting', 'held'))
                       AS pending,
                   count(*) FILTER (WHERE n.state = 'running')
                   - count(*) FILTER (WHERE o.state = 'running') AS running,
                   max(n.started_at) FILTER (WHERE n.state = 'running') AS started
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
            PERFORM crawlq_reconcile(a_keys, NULL);
        END IF;
    END IF;
    -- spawn_followups: a job that ends turns its remembered request into a new job
    -- (dropped if its key is live again or its crawl closed). Siblings:
    -- SQLiteStore._spawn_followups (sqlite/store.py), spawn_followups in prelude.lua.
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

-- crawl_finish: at commit of a transaction that left an open crawl with nothing pending
-- or running, the crawl finishes (once: the UPDATE re-checks) and its on_finish job is
-- scheduled, created at the crawl's last job end. Siblings: SQLiteStore._crawl_finish
-- (sqlite/store.py) and finish_crawls in redis/scripts/prelude.lua.
CREATE OR REPLACE FUNCTION crawlq_crawl_finish() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    spec json;
    at double precision;
    job bigint;
BEGIN
    UPDATE crawlq_crawls SET state = 'finished', finished_at = changed_at
    WHERE id = NEW.id AND state IN ('running', 'paused') AND pending = 0 AND running = 0
    RETURNING on_finish, changed_at INTO spec, at;
    IF NOT FOUND OR spec IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO crawlq_jobs (queue, task, args, kwargs, key, priority, run_at, state,
                             max_attempts, lease_seconds, timeout, created_at, limit_key,
                             key_digest, limit_digest)
    SELECT s.queue, s.task, s.args, s.kwargs, s.key, s.priority, r.run_at,
           crawlq_pending_state(false, s.limit_key IS NOT NULL, r.run_at <= at),
           s.max_attempts, s.lease_seconds, s.timeout, at, s.limit_key,
           crawlq_digest(s.key), crawlq_digest(s.limit_key)
    FROM json_to_record(spec) AS s(
        queue text, task text, args json, kwargs json, key text, priority bigint,
        run_at double precision, delay double precision, max_attempts integer,
        lease_seconds double precision, timeout double precision, limit_key text)
    CROSS JOIN LATERAL (SELECT coalesce(s.run_at, at + s.delay) AS run_at) AS r
    ON CONFLICT (queue, key_digest)
        WHERE key IS NOT NULL AND state IN ('scheduled', 'ready', 'waiting', 'held', 'running')
    DO NOTHING
    RETURNING id INTO job;
    IF job IS NULL THEN  -- its key is live: that job stands for it
        SELECT j.id INTO job FROM crawlq_jobs AS j, json_to_record(spec) AS s(queue text, key text)
        WHERE j.queue = s.queue AND j.key_digest = crawlq_digest(s.key) AND j.key = s.key
          AND j.state IN ('scheduled', 'ready', 'waiting', 'held', 'running');
    END IF;
    UPDATE crawlq_crawls SET on_finish_job = job WHERE id = NEW.id;
    RETURN NULL;
END $$;
