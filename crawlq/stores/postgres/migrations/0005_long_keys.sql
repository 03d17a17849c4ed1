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
-- 0003 with only those lines changed. Of them only crawlq_jobs_inserted is still here:
-- 0008_rules.sql replaces the others (crawlq_reconcile, crawlq_jobs_updated,
-- crawlq_crawl_finish), in the same transaction for a schema migrating from before this
-- file, so their bodies were taken out of it (issue 18; see 0003_crawls.sql).

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
