-- crawl_drop_pending.lua: an open crawl's pending jobs (held ones too) are cancelled,
-- keys reconciled; running ones run on. The crawl stays open: commit() finishes it (with
-- its on_finish) when nothing of it is left pending or running.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, crawl id
-- Returns: how many jobs were cancelled; 0 for a closed or unknown crawl.
-- Touches: {p}:crawl:{crawl}, {p}:cpend:{crawl}, {p}:job:{id}, {p}:q:{queue}:cancelled,
--          :counts, :keys, :prios, :p:{priority}, {p}:limit:{lkey}, {p}:lwait:{lkey}

local now = clock(ARGV[2])
local crawl = ARGV[3]
if not crawl_open(crawl) then
  return 0
end
local cancelled = cancel_crawl_jobs(crawl, now)
commit(now)
return cancelled
