-- crawl_pause.lua: a running crawl becomes paused; each of its pending jobs is held
-- (out of the claim index and its key's waiting zset). A key whose front was held gets
-- a new front from its other waiting jobs.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, crawl id
-- Returns: 1 if the crawl was running, else 0 (and nothing changed).
-- Touches: {p}:crawl:{crawl}, {p}:cpend:{crawl}, {p}:job:{id}, {p}:q:{queue}:counts,
--          :prios, :p:{priority}, {p}:limit:{lkey}, {p}:lwait:{lkey}

local now = clock(ARGV[2])
local crawl = crawl_transition({running = true}, 'paused')
if not crawl then
  return 0
end
local keys, fronts = {}, {}
for _, id in ipairs(redis.call('SMEMBERS', K.crawl_pending(crawl))) do
  local job = load(id)
  if job.sub ~= 'held' then
    unplace(job)
    to_held(job)
    if job.lkey and not fronts[job.lkey] then
      fronts[job.lkey] = true
      keys[#keys + 1] = job.lkey
    end
  end
end
for _, lkey in ipairs(keys) do
  reconcile(lkey)
end
commit(now)
return 1
