-- limit_block.lua: no job of a key starts before `until` (a later block wins). A key
-- without a record gets one with source none (its settings come from its first job).
-- A front whose block moved is timed again; running jobs are not touched.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, key, until
-- Returns: 1 if the block moved later, else 0.
-- Touches: {p}:limit:{lkey}, {p}:lwait:{lkey}, {p}:limitkeys, {p}:job:{id},
--          {p}:q:{queue}:counts, :prios, :p:{priority}; publishes {p}:wake:{queue}

local now = clock(ARGV[2])
local lkey, untl = ARGV[3], tonumber(ARGV[4])
local rk = K.limit(lkey)
local v = redis.call('HMGET', rk, 'source', 'blocked_until')
if not v[1] then
  redis.call('HSET', rk, 'source', 'none', 'min_interval', '0')
  redis.call('ZADD', K.limit_keys(), 0, lkey)
end
if v[2] and tonumber(v[2]) >= untl then
  return 0
end
redis.call('HSET', rk, 'blocked_until', fmt(untl))
retime(lkey)
commit(now)
return 1
