-- periodic_change.lua: pause, resume or remove a periodic schedule, or prune ledgers
-- (PeriodicStore.periodic_pause, _resume, _remove, _prune).
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, what, then per what: 'pause' name | 'resume' name next_fire |
--          'remove' name | 'prune' older_than
-- Returns: 1 if the schedule exists (pause, resume, remove), else 0; prune: the number
--          of ledger records deleted (each schedule keeps its latest).
-- Touches: {p}:periodic:s:{schedule}, {p}:periodic:due, {p}:periodic:names,
--          {p}:periodic:f:{schedule}, {p}:periodic:t:{schedule}

local now = clock(ARGV[2])
local what, name = ARGV[3], ARGV[4]

if what == 'prune' then
  local cutoff = now - tonumber(ARGV[4])
  local deleted = 0
  for _, each in ipairs(redis.call('ZRANGE', K.periodic_names(), 0, -1)) do
    local times = K.periodic_times(each)
    local old = redis.call('ZRANGEBYSCORE', times, '-inf', '(' .. fmt(cutoff))
    local total = redis.call('ZCARD', times)
    if #old == total and total > 0 then
      old[#old] = nil  -- keep the latest
    end
    if #old > 0 then
      call_many('HDEL', K.periodic_fires(each), old)
      call_many('ZREM', times, old)
      deleted = deleted + #old
    end
  end
  return deleted
end

local key = K.periodic(name)
if redis.call('EXISTS', key) == 0 then
  return 0
end
if what == 'pause' then
  redis.call('HSET', key, 'paused', 1, 'updated_at', fmt(now))
  redis.call('ZREM', K.periodic_due(), name)
elseif what == 'resume' then
  if redis.call('HGET', key, 'paused') == '1' then
    local next_fire = tonumber(ARGV[5])
    redis.call('HSET', key, 'paused', 0, 'next_fire', fmt(next_fire), 'updated_at', fmt(now))
    redis.call('ZADD', K.periodic_due(), next_fire, name)
  end
else
  redis.call('DEL', key, K.periodic_fires(name), K.periodic_times(name))
  redis.call('ZREM', K.periodic_due(), name)
  redis.call('ZREM', K.periodic_names(), name)
end
return 1
