-- Waiting for a job to finish (crawlq.stores.finished): a waiter registers the job here,
-- LISTENs on channel crawlq_finished, and a statement trigger NOTIFYs '<schema>:<id>'
-- for each registered job that becomes done, dead or cancelled, in the transaction that
-- finishes it. Only registered jobs are announced, so completions no one waits for send
-- no NOTIFY (which would serialise their commits): each UPDATE statement on crawlq_jobs
-- pays one look at this (usually empty) table.
-- A row lasts until `until` (store seconds), renewed by a waiter that waits on; expired
-- rows are deleted by the next registration. Unlogged: registrations are not worth WAL,
-- and a crash that empties the table only makes waiters fall back on their timeout.

CREATE UNLOGGED TABLE crawlq_finish_waits (
    job_id bigint           PRIMARY KEY,
    until  double precision NOT NULL
);

CREATE INDEX crawlq_finish_waits_until ON crawlq_finish_waits (until);

CREATE FUNCTION crawlq_jobs_finish_notify() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM crawlq_finish_waits) THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('crawlq_finished', TG_TABLE_SCHEMA || ':' || n.id)
    FROM new_rows AS n
    JOIN old_rows AS o ON o.id = n.id
    JOIN crawlq_finish_waits AS w ON w.job_id = n.id
    WHERE n.state IN ('done', 'dead', 'cancelled')
      AND o.state NOT IN ('done', 'dead', 'cancelled');
    RETURN NULL;
END $$;

CREATE TRIGGER crawlq_jobs_finish_notify AFTER UPDATE ON crawlq_jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION crawlq_jobs_finish_notify();
