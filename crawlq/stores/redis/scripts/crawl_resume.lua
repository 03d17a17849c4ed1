-- crawl_resume.lua: a paused crawl runs again: each held job takes its place again
-- (the claim index, or its key's waiting zset and then the key is reconciled), with its
-- own run_at. Waiting workers are woken.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, crawl id
-- Returns: 1 if the crawl was paused, else 0 (and nothing changed).
-- Touches: {p}:crawl:{crawl}, {p}:cpend:{crawl}, {p}:job:{id}, {p}:q:{queue}:counts,
--          :prios, :p:{priority}, {p}:limit:{lkey}, {p}:lwait:{lkey}; publishes
--          {p}:wake:{queue}

local now = clock(ARGV[2])
local crawl = crawl_transition({paused = true}, 'running')
if not crawl then
  return 0
end
for _, id in ipairs(crawl_pending_ids(crawl)) do
  local job = load(id)
  if job.sub == 'held' then
    unplace(job)
    place(job)
  end
end
commit(now)
return 1
