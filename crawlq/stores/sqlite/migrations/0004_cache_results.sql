-- A key/value cache with a time to live, and per-crawl results (see Store.cache_* and
-- Store.result_*).

-- The cache: robots.txt per host for every worker, "someone is fetching it" locks. An
-- entry is valid while expires_at > now; job_prune deletes the expired ones.
CREATE TABLE crawlq_cache (
    key        TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    expires_at REAL NOT NULL
);

CREATE INDEX crawlq_cache_expires ON crawlq_cache (expires_at);

-- One record per (crawl, 16-byte key), the first one given, kept as long as the crawl.
-- seq numbers a crawl's records 1, 2, 3, ... in insertion order (MAX(seq) + 1 inside the
-- write transaction, which every writer takes in turn), so the count is MAX(seq).
CREATE TABLE crawlq_results (
    crawl_id INTEGER NOT NULL,
    key      BLOB    NOT NULL,
    seq      INTEGER NOT NULL,
    record   TEXT    NOT NULL,
    PRIMARY KEY (crawl_id, key)
);

CREATE UNIQUE INDEX crawlq_results_seq ON crawlq_results (crawl_id, seq);
