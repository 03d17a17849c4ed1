-- A key/value cache with a time to live, and per-crawl results (see Store.cache_* and
-- Store.result_*). Keys, values and records are the UTF-8 bytes of their text (bytea):
-- PostgreSQL text cannot hold NUL, and a robots.txt file may. convert_from(x, 'UTF8')
-- shows them in psql.

-- The cache: robots.txt per host for every worker, "someone is fetching it" locks. An
-- entry is valid while expires_at > now; job_prune deletes the expired ones. It is found
-- by the SHA-256 of its key (key_hash), so a key of any length fits the index (a btree
-- entry holds at most about 2.7 kB).
CREATE TABLE crawlq_cache (
    key_hash   bytea            PRIMARY KEY,
    key        bytea            NOT NULL,
    value      bytea            NOT NULL,
    expires_at double precision NOT NULL
);

CREATE INDEX crawlq_cache_expires ON crawlq_cache (expires_at);

-- One record per (crawl, 16-byte key), the first one given, kept as long as the crawl.
CREATE TABLE crawlq_results (
    crawl_id bigint NOT NULL,
    key      bytea  NOT NULL,
    seq      bigint NOT NULL,
    record   bytea  NOT NULL,
    PRIMARY KEY (crawl_id, key)
);

CREATE UNIQUE INDEX crawlq_results_seq ON crawlq_results (crawl_id, seq);

-- A crawl's last sequence number (= its number of results). result_add locks this row
-- for its whole transaction, so the writers of one crawl take turns and commit in seq
-- order: a reader paging by seq never sees a record before one numbered lower. (A
-- bigserial would let a later number commit first, and such a reader skip the earlier
-- one.) A row of its own, not a column of crawlq_crawls, so results never wait for the
-- crawl's claims and completions, nor they for results.
CREATE TABLE crawlq_result_seqs (
    crawl_id bigint PRIMARY KEY,
    last_seq bigint NOT NULL
);
