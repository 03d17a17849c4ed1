-- cache_get.lua: read a cache entry (Store.cache_get).
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, key
-- Returns: the value, or false (None) if the entry is absent or expired.
-- Touches: {p}:cache:{ckey} (read only)

local now = clock(ARGV[2])
local v = redis.call('HMGET', K.cache(ARGV[3]), 'value', 'expires_at')
if v[1] and tonumber(v[2]) > now then
  return v[1]
end
return false
