-- periodic_put.lua: create a periodic schedule or change its definition
-- (PeriodicStore.periodic_put). An equal definition changes nothing; a changed one gets
-- revision + 1 and the given next fire time, and keeps its paused flag.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, name, definition, next_fire
-- Returns: 'created', 'updated' or 'unchanged'
-- Touches: {p}:periodic:s:{schedule}, {p}:periodic:due, {p}:periodic:names

local now = clock(ARGV[2])
local name, definition, next_fire = ARGV[3], ARGV[4], tonumber(ARGV[5])
local key = K.periodic(name)
local v = redis.call('HMGET', key, 'definition', 'paused')
if v[1] == definition then
  return 'unchanged'
end
local outcome = 'updated'
if not v[1] then
  outcome = 'created'
  redis.call('HSET', key, 'revision', 0, 'paused', 0, 'created_at', fmt(now))
  redis.call('ZADD', K.periodic_names(), 0, name)
end
redis.call('HINCRBY', key, 'revision', 1)
redis.call('HSET', key, 'definition', definition, 'next_fire', fmt(next_fire),
           'updated_at', fmt(now))
if v[2] ~= '1' then
  redis.call('ZADD', K.periodic_due(), next_fire, name)
end
return outcome
