-- Keys of any length (issue 14). A btree entry holds at most about 2.7 kB, so a unique
-- index on a key itself refused longer keys ("index row size 2848 exceeds btree version 4
-- maximum 2704"), while SQLite and Redis took them. Keys stay in their columns:
-- - a job's key and limit key have their SHA-256 (crawlq_digest, 32 bytes) in key_digest
--   and limit_digest, written when the job is inserted (the key never changes after), so
--   the many updates of a job copy them instead of hashing again. Uniqueness is on
--   (queue, key_digest); a look-up by key compares the key too;
-- - a key's waiting jobs are ordered in an index led by limit_digest, and found by the
--   digest alone (comparing the key as well makes the planner expect one row, and sort
--   them all instead of reading the first in order);
-- - a key record (crawlq_keys) is unique by its digest and found by a hash index on the
--   key (no size limit; its frequent counter updates stay HOT).
-- The functions that insert jobs or look them up by key are replaced; each is that of
-- 0003 with only those lines changed.

-- The SHA-256 of a text's UTF-8 bytes. IMMUTABLE so that an index can use it:
-- convert_to is only STABLE because a conversion could be redefined, and crawlq defines
-- none.
CREATE FUNCTION crawlq_digest(t text) RETURNS bytea
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT sha256(convert_to(t, 'UTF8')) $$;

ALTER TABLE crawlq_jobs ADD COLUMN key_digest bytea, ADD COLUMN limit_digest bytea;
ALTER TABLE crawlq_jobs DISABLE TRIGGER crawlq_jobs_updated;  -- nothing else changes
UPDATE crawlq_jobs
SET key_digest = crawlq_digest(key), limit_digest = crawlq_digest(limit_key)
WHERE key IS NOT NULL OR limit_key IS NOT NULL;
ALTER TABLE crawlq_jobs ENABLE TRIGGER crawlq_jobs_updated;
ALTER TABLE crawlq_jobs ADD CONSTRAINT crawlq_jobs_digests
    CHECK ((key_digest IS NULL) = (key IS NULL) AND (limit_digest IS NULL) = (limit_key IS NULL));

DROP INDEX crawlq_jobs_key;
CREATE UNIQUE INDEX crawlq_jobs_key ON crawlq_jobs (queue, key_digest)
    WHERE key IS NOT NULL
      AND state IN ('scheduled', 'ready', 'waiting', 'held', 'running');

ALTER TABLE crawlq_keys DROP CONSTRAINT crawlq_keys_pkey;
ALTER TABLE crawlq_keys ALTER COLUMN key SET NOT NULL;
CREATE UNIQUE INDEX crawlq_keys_key ON crawlq_keys (crawlq_digest(key));
CREATE INDEX crawlq_keys_lookup ON crawlq_keys USING hash (key);

DROP INDEX crawlq_jobs_waiting;
CREATE INDEX crawlq_jobs_waiting ON crawlq_jobs (limit_digest, priority DESC, run_at, id)
    WHERE state = 'waiting';


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
        state = CASE WHEN pick.gate <= now THEN 'ready' ELSE 'scheduled' END
    FROM pick WHERE j.id = pick.id;
$$;

CREATE OR REPLACE FUNCTION crawlq_jobs_inserted() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
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
    PERFORM crawlq_crawls_apply(json_agg(json_build_object(
        'crawl_id', crawl_id, 'state', state, 'n', 1, 'finished_at', created_at)))
    FROM new_rows WHERE crawl_id IS NOT NULL;
    -- A key used for the first time (or only blocked so far) takes its settings from the
    -- crawl of its first new job, else from the queue default, else none.
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
        source = CASE WHEN k.source = 'none' THEN 'default' ELSE k.source END;
    PERFORM crawlq_reconcile(array_agg(DISTINCT limit_key), NULL)
    FROM new_rows WHERE limit_key IS NOT NULL AND state = 'waiting';
    RETURN NULL;
END $$;

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
    -- A job that ends turns its remembered request into a new job (dropped if its key is
    -- live again or its crawl closed; held in a paused crawl; waiting with a limit key).
    INSERT INTO crawlq_jobs (queue, task, args, kwargs, key, priority, run_at, state,
                             max_attempts, lease_seconds, timeout, created_at, crawl_id,
                             limit_key, key_digest, limit_digest)
    SELECT new_rows.queue, f.task, f.args, f.kwargs, new_rows.key, f.priority, f.run_at,
           CASE WHEN c.state = 'paused' THEN 'held'
                WHEN f.limit_key IS NOT NULL THEN 'waiting'
                WHEN f.run_at <= new_rows.finished_at THEN 'ready'
                ELSE 'scheduled' END,
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
           CASE WHEN s.limit_key IS NOT NULL THEN 'waiting'
                WHEN r.run_at <= at THEN 'ready' ELSE 'scheduled' END,
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
