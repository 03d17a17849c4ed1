-- job_schedule.lua: schedule many jobs at once (Store.job_schedule).
--
-- Every spec's crawl is checked before the first write: an unknown or closed crawl
-- refuses the whole batch. A job of a paused crawl is held; a keyed job waits behind
-- its limit key's front; a fingerprint already seen by its crawl schedules nothing.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, specs (a JSON list; see spec_from in the prelude)
-- Returns: {id, outcome} per spec, in order; outcome is created, updated, unchanged,
--          deferred or seen (id 0). Or, writing nothing, {kind, crawl, state} with kind
--          crawl_not_found or crawl_closed.
-- Touches: {p}:ids, {p}:jobs, {p}:job:{id}, {p}:followup:{id}, {p}:queues,
--          {p}:q:{queue}:keys, :counts, :prios, :p:{priority}, {p}:crawl:{crawl},
--          {p}:seen:{crawl}, {p}:cpend:{crawl}, {p}:limit:{lkey}, {p}:lwait:{lkey},
--          {p}:limitkeys; publishes {p}:wake:{queue}

local now = clock(ARGV[2])
local specs = specs_from(cjson.decode(ARGV[3]), now)
local refused = closed_crawl(specs)
if refused then
  return refused
end
local results = {}
for n, spec in ipairs(specs) do
  local id, outcome = schedule(spec, now)
  results[n] = {id, outcome}
end
commit(now)
return results
