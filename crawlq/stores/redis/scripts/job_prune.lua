-- job_prune.lua: delete done and cancelled jobs that finished before now - retention;
-- at most `budget` of them per call.
--
-- Then, when no job is left to delete, limit key records with nothing pending or
-- running, not overridden, whose block and interval are over: `budget` key names per
-- call, from the key cursor on (keys.py {p}:limitkeys).
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, retention (seconds), budget, key cursor ('' = from the first)
-- Returns: {deleted, more, cursor}: how many jobs were deleted, 1 if there is more to
--          do, and the key cursor for the next call.
-- Touches: {p}:queues, {p}:q:{queue}:done, :cancelled, :counts, {p}:jobs, {p}:job:{id},
--          {p}:limitkeys, {p}:limit:{lkey}

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
      commit(now)
      return {deleted, 1, ARGV[5]}
    end
  end
end
commit(now)

local after = ARGV[5]
local names = redis.call('ZRANGEBYLEX', K.limit_keys(), after == '' and '-' or '(' .. after,
  '+', 'LIMIT', 0, budget)
for _, lkey in ipairs(names) do
  local rk = K.limit(lkey)
  local v = redis.call('HMGET', rk, 'pending', 'running', 'source', 'blocked_until',
    'last_start', 'min_interval')
  local free = (tonumber(v[1]) or 0) == 0 and (tonumber(v[2]) or 0) == 0
    and v[3] ~= 'override' and (not v[4] or tonumber(v[4]) < now)
    and (not v[5] or tonumber(v[5]) + (tonumber(v[6]) or 0) < now)
  if free then
    redis.call('DEL', rk, K.limit_waiting(lkey))
    redis.call('ZREM', K.limit_keys(), lkey)
  end
end
if #names < budget then
  return {deleted, 0, ''}
end
return {deleted, 1, names[#names]}
