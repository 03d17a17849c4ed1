-- Crawls, seen sets and limit keys (see crawlq.crawls and crawlq.limits).
--
-- New internal job states: 'waiting' (pending behind its limit key's front job) and
-- 'held' (pending in a paused crawl). Of a key's pending jobs at most one, its front, is
-- 'scheduled' or 'ready'. The triggers of crawlq_jobs keep, in the statement that changes
-- jobs, the counters of crawls and the records of keys, and choose each key's front
-- (crawlq_reconcile); all of that is skipped for statements whose jobs have neither a
-- crawl nor a limit key. A deferred trigger finishes a crawl when the transaction that
-- brought its pending + running to 0 commits, so children scheduled later in the same
-- transaction count first.

ALTER TABLE crawlq_jobs
    ADD COLUMN crawl_id   bigint,
    ADD COLUMN limit_key  text COLLATE "C",
    ADD COLUMN own_run_at double precision;

ALTER TABLE crawlq_jobs DROP CONSTRAINT crawlq_jobs_state_check;
ALTER TABLE crawlq_jobs ADD CONSTRAINT crawlq_jobs_state_check CHECK (state IN
    ('scheduled', 'ready', 'waiting', 'held', 'running', 'done', 'dead', 'cancelled'));

-- Uniqueness now covers every live state.
DROP INDEX crawlq_jobs_key;
CREATE UNIQUE INDEX crawlq_jobs_key ON crawlq_jobs (queue, key)
    WHERE key IS NOT NULL
      AND state IN ('scheduled', 'ready', 'waiting', 'held', 'running');

-- Pause, resume and cancel of a crawl: its pending jobs.
CREATE INDEX crawlq_jobs_crawl_pending ON crawlq_jobs (crawl_id)
    WHERE state IN ('scheduled', 'ready', 'waiting', 'held');

-- The best waiting job of a key (reconcile).
CREATE INDEX crawlq_jobs_waiting ON crawlq_jobs (limit_key, priority DESC, run_at, id)
    WHERE state = 'waiting';

CREATE TABLE crawlq_crawls (
    id            bigserial        PRIMARY KEY,
    name          text             NOT NULL,
    meta          json             NOT NULL,
    state         text             NOT NULL
                  CHECK (state IN ('running', 'paused', 'finished', 'cancelled')),
    on_finish     json,
    on_finish_job bigint,
    limits        json,
    pending       bigint           NOT NULL DEFAULT 0,
    running       bigint           NOT NULL DEFAULT 0,
    done          bigint           NOT NULL DEFAULT 0,
    dead          bigint           NOT NULL DEFAULT 0,
    cancelled     bigint           NOT NULL DEFAULT 0,
    seen          bigint           NOT NULL DEFAULT 0,
    created_at    double precision NOT NULL,
    changed_at    double precision NOT NULL,  -- the last job end: a finish happens then
    finished_at   double precision
);

CREATE INDEX crawlq_crawls_state ON crawlq_crawls (state, id);

CREATE TABLE crawlq_seen (
    crawl_id bigint NOT NULL,
    fp       bytea  NOT NULL,
    PRIMARY KEY (crawl_id, fp)
);

CREATE TABLE crawlq_keys (
    key           text COLLATE "C" PRIMARY KEY,
    max_running   integer,
    min_interval  double precision NOT NULL DEFAULT 0,
    source        text             NOT NULL CHECK (source IN ('none', 'default', 'override')),
    blocked_until double precision,
    running       bigint           NOT NULL DEFAULT 0,
    last_start    double precision,
    pending       bigint           NOT NULL DEFAULT 0,
    front         bigint
);

CREATE TABLE crawlq_limit_defaults (
    queue        text COLLATE "C" PRIMARY KEY,
    max_running  integer,
    min_interval double precision NOT NULL DEFAULT 0
);

-- The front of each key that has none and room to start a job: its best waiting job,
-- due at max(run_at, last_start + min_interval, blocked_until) (its own run_at kept in
-- own_run_at when later). ``now`` NULL (a trigger) makes it 'scheduled': the claim
-- promotes it when due, as any scheduled job.
CREATE FUNCTION crawlq_reconcile(keys text[], now double precision) RETURNS void
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
            WHERE limit_key = k.key AND state = 'waiting'
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

-- Counters of the crawls of changed jobs: one UPDATE per statement, the rows locked
-- first in id order (no deadlock between batches). ``d`` rows: (crawl_id, internal
-- state, +1 / -1, finished_at).
CREATE FUNCTION crawlq_crawls_apply(d json) RETURNS void
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    a_ids bigint[];
    a_pending bigint[];
    a_running bigint[];
    a_done bigint[];
    a_dead bigint[];
    a_cancelled bigint[];
    a_ended double precision[];
BEGIN
    SELECT array_agg(c.crawl_id ORDER BY c.crawl_id), array_agg(c.pending ORDER BY c.crawl_id),
           array_agg(c.running ORDER BY c.crawl_id), array_agg(c.done ORDER BY c.crawl_id),
           array_agg(c.dead ORDER BY c.crawl_id), array_agg(c.cancelled ORDER BY c.crawl_id),
           array_agg(c.ended ORDER BY c.crawl_id)
    INTO a_ids, a_pending, a_running, a_done, a_dead, a_cancelled, a_ended
    FROM (
        SELECT x.crawl_id,
               coalesce(sum(x.n) FILTER (WHERE x.state IN
                   ('scheduled', 'ready', 'waiting', 'held')), 0) AS pending,
               coalesce(sum(x.n) FILTER (WHERE x.state = 'running'), 0) AS running,
               coalesce(sum(x.n) FILTER (WHERE x.state = 'done'), 0) AS done,
               coalesce(sum(x.n) FILTER (WHERE x.state = 'dead'), 0) AS dead,
               coalesce(sum(x.n) FILTER (WHERE x.state = 'cancelled'), 0) AS cancelled,
               max(x.finished_at) FILTER (WHERE x.n > 0) AS ended
        FROM json_to_recordset(d) AS x(crawl_id bigint, state text, n integer,
                                       finished_at double precision)
        GROUP BY x.crawl_id
    ) AS c
    WHERE c.pending <> 0 OR c.running <> 0 OR c.done <> 0 OR c.dead <> 0 OR c.cancelled <> 0;
    -- Every crawl of a job whose state changed is locked, even without a net change (a
    -- pause holding jobs): locks are then always taken jobs, crawls, keys in that order.
    PERFORM FROM crawlq_crawls
    WHERE id IN (SELECT (x ->> 'crawl_id')::bigint FROM json_array_elements(d) AS x)
    ORDER BY id FOR UPDATE;
    IF a_ids IS NULL THEN
        RETURN;
    END IF;
    UPDATE crawlq_crawls AS cr
    SET pending = cr.pending + ch.pending, running = cr.running + ch.running,
        done = cr.done + ch.done, dead = cr.dead + ch.dead,
        cancelled = cr.cancelled + ch.cancelled,
        changed_at = coalesce(ch.ended, cr.changed_at)
    FROM unnest(a_ids, a_pending, a_running, a_done, a_dead, a_cancelled, a_ended)
         AS ch(crawl_id, pending, running, done, dead, cancelled, ended)
    WHERE cr.id = ch.crawl_id;
END $$;

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
    ON CONFLICT (key) DO UPDATE
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
        ON CONFLICT (key) DO UPDATE
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
                             limit_key)
    SELECT new_rows.queue, f.task, f.args, f.kwargs, new_rows.key, f.priority, f.run_at,
           CASE WHEN c.state = 'paused' THEN 'held'
                WHEN f.limit_key IS NOT NULL THEN 'waiting'
                WHEN f.run_at <= new_rows.finished_at THEN 'ready'
                ELSE 'scheduled' END,
           f.max_attempts, f.lease_seconds, f.timeout, new_rows.finished_at, f.crawl,
           f.limit_key
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
    ON CONFLICT (queue, key)
        WHERE key IS NOT NULL AND state IN ('scheduled', 'ready', 'waiting', 'held', 'running')
    DO NOTHING;
    RETURN NULL;
END $$;

-- Finishing: at commit of a transaction that left an open crawl with nothing pending or
-- running, the crawl finishes (once: the UPDATE re-checks) and its on_finish job is
-- scheduled, created at the crawl's last job end.
CREATE FUNCTION crawlq_crawl_finish() RETURNS trigger
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
                             max_attempts, lease_seconds, timeout, created_at, limit_key)
    SELECT s.queue, s.task, s.args, s.kwargs, s.key, s.priority, r.run_at,
           CASE WHEN s.limit_key IS NOT NULL THEN 'waiting'
                WHEN r.run_at <= at THEN 'ready' ELSE 'scheduled' END,
           s.max_attempts, s.lease_seconds, s.timeout, at, s.limit_key
    FROM json_to_record(spec) AS s(
        queue text, task text, args json, kwargs json, key text, priority bigint,
        run_at double precision, delay double precision, max_attempts integer,
        lease_seconds double precision, timeout double precision, limit_key text)
    CROSS JOIN LATERAL (SELECT coalesce(s.run_at, at + s.delay) AS run_at) AS r
    ON CONFLICT (queue, key)
        WHERE key IS NOT NULL AND state IN ('scheduled', 'ready', 'waiting', 'held', 'running')
    DO NOTHING
    RETURNING id INTO job;
    IF job IS NULL THEN  -- its key is live: that job stands for it
        SELECT j.id INTO job FROM crawlq_jobs AS j, json_to_record(spec) AS s(queue text, key text)
        WHERE j.queue = s.queue AND j.key = s.key
          AND j.state IN ('scheduled', 'ready', 'waiting', 'held', 'running');
    END IF;
    UPDATE crawlq_crawls SET on_finish_job = job WHERE id = NEW.id;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER crawlq_crawls_finish AFTER INSERT OR UPDATE ON crawlq_crawls
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    WHEN (NEW.pending = 0 AND NEW.running = 0 AND NEW.state IN ('running', 'paused'))
    EXECUTE FUNCTION crawlq_crawl_finish();
