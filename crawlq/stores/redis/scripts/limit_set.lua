-- limit_set.lua: override a limit key's settings (creating its record), then time its
-- front again: a front waiting on the old interval moves, one now at the cap waits.
-- blocked_until is left as it is.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, key, max_running ('' = no cap), min_interval
-- Returns: 1.
-- Touches: {p}:limit:{lkey}, {p}:lwait:{lkey}, {p}:limitkeys, {p}:job:{id},
--          {p}:q:{queue}:counts, :prios, :p:{priority}; publishes {p}:wake:{queue}

local now = clock(ARGV[2])
local lkey = ARGV[3]
local rk = K.limit(lkey)
redis.call('HSET', rk, 'source', 'override', 'min_interval', ARGV[5])
if ARGV[4] == '' then
  redis.call('HDEL', rk, 'max_running')
else
  redis.call('HSET', rk, 'max_running', ARGV[4])
end
redis.call('ZADD', K.limit_keys(), 0, lkey)
retime(lkey)
commit(now)
return 1
