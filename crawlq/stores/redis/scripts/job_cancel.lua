-- job_cancel.lua: cancel the pending or running jobs among some ids. A cancelled job
-- frees its key and drops its remembered request; its lease becomes stale.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, id...
-- Returns: the ids cancelled, in id order.
-- Touches: {p}:job:{id}, {p}:followup:{id}, {p}:running, {p}:wjobs:{worker},
--          {p}:q:{queue}:cancelled, :counts, :keys, :prios, :p:{priority}
--          crawls: {p}:crawl:{crawl}, {p}:cpend:{crawl}; limits: {p}:limit:{lkey},
--          {p}:lwait:{lkey} (a finished crawl schedules its on_finish)

local now = clock(ARGV[2])
local ids = ids_from(3)
local cancelled = {}
for _, id in ipairs(ids) do
  local job = load(id)
  if job and (job.state == 'pending' or job.state == 'running') then
    finish(job, 'cancelled', now, {})
    cancelled[#cancelled + 1] = id
  end
end
commit(now)
return cancelled
