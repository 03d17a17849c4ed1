-- Workers, the index that finds a worker's running jobs, and maintenance leases.
--
-- Worker states: 'alive' (registered, heartbeating), 'stopped' (clean exit), 'dead'
-- (declared dead by worker_reap, which returned its running jobs). Times are seconds
-- since the Unix epoch on the server's clock (crawlq_now), as for jobs.

CREATE TABLE crawlq_workers (
    id             text             PRIMARY KEY,
    host           text             NOT NULL,
    pid            bigint           NOT NULL,
    queues         text[]           NOT NULL,
    runtime        text             NOT NULL,
    concurrency    integer          NOT NULL,
    started_at     double precision NOT NULL,
    last_heartbeat double precision NOT NULL,
    running        bigint           NOT NULL,
    done           bigint           NOT NULL,
    failed         bigint           NOT NULL,
    rss_bytes      bigint,
    state          text             NOT NULL CHECK (state IN ('alive', 'stopped', 'dead')),
    stopped_at     double precision
);

-- worker_reap: alive workers by last heartbeat.
CREATE INDEX crawlq_workers_alive ON crawlq_workers (last_heartbeat)
    WHERE state = 'alive';

-- worker_reap: the running jobs of one worker, without scanning the running jobs.
CREATE INDEX crawlq_jobs_worker ON crawlq_jobs (worker_id)
    WHERE state = 'running';

-- Named leases on maintenance duties (one owner at a time until expires_at).
CREATE TABLE crawlq_maintenance (
    duty       text             PRIMARY KEY,
    owner      text             NOT NULL,
    expires_at double precision NOT NULL
);
