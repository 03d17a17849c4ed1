-- crawl_cancel.lua: an open crawl becomes cancelled (finished_at = now, no on_finish):
-- its pending jobs are cancelled (keys reconciled); running ones run on, and their
-- completion adds no child.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, crawl id
-- Returns: 1 if the crawl was open, else 0 (and nothing changed).
-- Touches: {p}:crawl:{crawl}, {p}:cpend:{crawl}, {p}:job:{id}, {p}:q:{queue}:cancelled,
--          :counts, :keys, :prios, :p:{priority}, {p}:limit:{lkey}, {p}:lwait:{lkey}

local now = clock(ARGV[2])
local crawl = crawl_transition({running = true, paused = true}, 'cancelled',
  {'finished_at', fmt(now)})
if not crawl then
  return 0
end
cancel_crawl_jobs(crawl, now)
commit(now)
return 1
