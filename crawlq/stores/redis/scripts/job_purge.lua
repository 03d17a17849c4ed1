-- job_purge.lua: delete matching finished jobs; one page of the filter at a time.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now (unused), then the 11 filter arguments (read_filter; states are
--          finished ones only)
-- Returns: {cursor, done, matched, deleted}: as job_list.lua, with how many were deleted.
-- Touches: {p}:jobs, {p}:job:{id}, {p}:followup:{id}, {p}:q:{queue}:{state}, :counts

local deleted = 0
local cursor, done, matched = scan(read_filter(3), function(id)
  local job = load(id)
  redis.call('DEL', K.job(id), K.followup(id))
  redis.call('ZREM', K.jobs(), id)
  redis.call('ZREM', K.finished(job.queue, job.state), id)
  count(job.queue, job.state, -1)
  deleted = deleted + 1
end)
commit(nil)
return {cursor, done, matched, deleted}
