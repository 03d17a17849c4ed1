-- crawl_delete.lua: the first and the last step of deleting a crawl (crawl_delete.py);
-- between them job_purge deletes its jobs, a page of ids at a time.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, crawl id, step: "close" or "forget"
-- Returns: 1, or 0 when there is no such crawl.
--   close:  an open crawl becomes cancelled (no on_finish); every live job of the crawl
--           is cancelled: the pending ones ({p}:cpend:{crawl}) and the running ones
--           (found in {p}:running), whose leases go stale; keys reconciled.
--   forget: the crawl's record, seen set, results and pending set are removed (UNLINK:
--           a large seen set is freed in the background).
-- Touches: close as crawl_cancel.lua, and {p}:running, {p}:wjobs:{worker};
--          forget: {p}:crawls, {p}:crawl:{crawl}, {p}:seen:{crawl}, {p}:rkeys:{crawl},
--          {p}:results:{crawl}, {p}:cpend:{crawl}

local now = clock(ARGV[2])
local crawl = ARGV[3]
if not crawl_state(crawl) then
  return 0
end
if ARGV[4] == 'forget' then
  redis.call('UNLINK', K.crawl(crawl), K.seen(crawl), K.result_keys(crawl), K.results(crawl),
    K.crawl_pending(crawl))
  redis.call('ZREM', K.crawls(), crawl)
  return 1
end
if crawl_open(crawl) then
  set_crawl_state(crawl, 'cancelled', {'finished_at', fmt(now)})
end
local running = {}
for _, id in ipairs(redis.call('ZRANGE', K.running(), 0, -1)) do
  if redis.call('HGET', K.job(id), 'crawl_id') == crawl then
    running[#running + 1] = id
  end
end
cancel_crawl_jobs(crawl, now, running)
commit(now)
return 1
