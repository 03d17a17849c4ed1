-- Periodic schedules (crawlq.periodic) and their ledger of fire times: the primary key
-- (name, fire_at) of crawlq_periodic_fires is the unique write that makes a fire time
-- fire once, in the transaction that schedules its job.

CREATE TABLE crawlq_periodic (
    name       TEXT    PRIMARY KEY,
    definition TEXT    NOT NULL,
    revision   INTEGER NOT NULL DEFAULT 1,
    paused     INTEGER NOT NULL DEFAULT 0,
    next_fire  REAL    NOT NULL,
    last_fire  REAL,
    last_job   INTEGER,
    created_at REAL    NOT NULL,
    updated_at REAL    NOT NULL
);

CREATE INDEX crawlq_periodic_due ON crawlq_periodic (next_fire, name) WHERE paused = 0;

CREATE TABLE crawlq_periodic_fires (
    name     TEXT NOT NULL,
    fire_at  REAL NOT NULL,
    outcome  TEXT NOT NULL,
    job_id   INTEGER,
    fired_at REAL NOT NULL,
    PRIMARY KEY (name, fire_at)
);

CREATE INDEX crawlq_periodic_fires_age ON crawlq_periodic_fires (fire_at);
