-- job_prune.lua: delete done and cancelled jobs that finished before now - retention;
-- at most `budget` of them per call.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, retention (seconds), budget
-- Returns: {deleted, more}: how many were deleted, and 1 if the budget ran out.
-- Touches: {p}:queues, {p}:q:{queue}:done, :cancelled, :counts, {p}:jobs, {p}:job:{id}

local now = clock(ARGV[2])
local before = '(' .. fmt(now - tonumber(ARGV[3]))
local budget = tonumber(ARGV[4])
local deleted = 0
for _, queue in ipairs(redis.call('SMEMBERS', K.queues())) do
  for _, state in ipairs({'done', 'cancelled'}) do
    local finished = K.finished(queue, state)
    local ids = redis.call('ZRANGEBYSCORE', finished, '-inf', before, 'LIMIT', 0,
      budget - deleted)
    for _, id in ipairs(ids) do
      redis.call('DEL', K.job(id), K.followup(id))
      redis.call('ZREM', K.jobs(), id)
      redis.call('ZREM', finished, id)
      count(queue, state, -1)
    end
    deleted = deleted + #ids
    if deleted >= budget then
      commit()
      return {deleted, 1}
    end
  end
end
commit()
return {deleted, 0}
