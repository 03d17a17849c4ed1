-- job_reschedule.lua: move the pending jobs among some ids to a new run_at, as a
-- schedule with on_conflict="replace" moves them (update_pending in the prelude).
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, run_at ('' for now), id...
-- Returns: the ids moved, in id order.
-- Touches: {p}:job:{id}, {p}:q:{queue}:counts, :prios, :p:{priority},
--          {p}:limit:{lkey}, {p}:lwait:{lkey}; publishes {p}:wake:{queue}

local now = clock(ARGV[2])
local run_at = now
if ARGV[3] ~= '' then
  run_at = tonumber(ARGV[3])
end
local ids = ids_from(4)
local moved = {}
for _, id in ipairs(ids) do
  local job = load(id)
  if job and job.state == 'pending' then
    local req = request_from_hash(K.job(id))
    req.run_at = run_at
    update_pending(job, req)
    moved[#moved + 1] = id
  end
end
commit(now)
return moved
