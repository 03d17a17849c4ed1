-- Periodic schedules (crawlq.periodic) and their ledger of fire times: the primary key
-- (name, fire_at) of crawlq_periodic_fires is the unique write that makes a fire time
-- fire once, in the transaction that schedules its job.

CREATE TABLE crawlq_periodic (
    name       text             PRIMARY KEY,
    definition text             NOT NULL,
    revision   bigint           NOT NULL DEFAULT 1,
    paused     boolean          NOT NULL DEFAULT false,
    next_fire  double precision NOT NULL,
    last_fire  double precision,
    last_job   bigint,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL
);

CREATE INDEX crawlq_periodic_due ON crawlq_periodic (next_fire, name) WHERE NOT paused;

CREATE TABLE crawlq_periodic_fires (
    name     text             NOT NULL,
    fire_at  double precision NOT NULL,
    outcome  text             NOT NULL,
    job_id   bigint,
    fired_at double precision NOT NULL,
    PRIMARY KEY (name, fire_at)
);

CREATE INDEX crawlq_periodic_fires_age ON crawlq_periodic_fires (fire_at);
