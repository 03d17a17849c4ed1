-- job_schedule.lua: schedule many jobs at once (Store.job_schedule).
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, specs (a JSON list; see spec_from in the prelude)
-- Returns: {id, outcome} per spec, in order; outcome is created, updated, unchanged
--          or deferred.
-- Touches: {p}:ids, {p}:jobs, {p}:job:{id}, {p}:followup:{id}, {p}:queues,
--          {p}:q:{queue}:keys, :counts, :prios, :p:{priority}; publishes {p}:wake:{queue}

local now = clock(ARGV[2])
local results = {}
for n, spec in ipairs(specs_from(cjson.decode(ARGV[3]), now)) do
  local id, outcome = schedule(spec, now)
  results[n] = {id, outcome}
end
commit()
return results
