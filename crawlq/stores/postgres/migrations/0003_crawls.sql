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

-- crawlq_reconcile (the front of each key that has none and room to start a job) and
-- the trigger functions crawlq_jobs_inserted and crawlq_jobs_updated, which keep the
-- counters of crawls and keys, were first defined here; 0005 and 0008 replaced them,
-- and their bodies were taken out of this file (issue 18). They are current in
-- 0005_long_keys.sql (crawlq_jobs_inserted) and 0008_rules.sql (the others). A schema
-- that ran this file as it was has them replaced by those migrations; one migrating from
-- before it runs every later migration in the same transaction, before any job changes.
-- Both end with the same functions (tests/migration/test_schema_files.py checks it from
-- every version).

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



-- Finishing: at commit of a transaction that left an open crawl with nothing pending or
-- running, the crawl finishes and its on_finish job is scheduled (crawl_finish). Only
-- the function's name is made here, for its trigger: its body, first defined here, is
-- that of 0008_rules.sql, which replaces this one in the same transaction (see above).
CREATE FUNCTION crawlq_crawl_finish() RETURNS trigger
    LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;

CREATE CONSTRAINT TRIGGER crawlq_crawls_finish AFTER INSERT OR UPDATE ON crawlq_crawls
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    WHEN (NEW.pending = 0 AND NEW.running = 0 AND NEW.state IN ('running', 'paused'))
    EXECUTE FUNCTION crawlq_crawl_finish();
