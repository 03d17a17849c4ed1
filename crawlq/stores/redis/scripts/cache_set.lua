-- cache_set.lua: set a cache entry (Store.cache_set), or only if it is absent or expired
-- (Store.cache_add).
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, key, value, ttl, mode ('set' or 'add')
-- Returns: 1 if the entry now holds value, until now + ttl; 0 if mode is 'add' and an
--          unexpired entry was there (nothing written).
-- Touches: {p}:cache:{ckey}
--
-- expires_at (the store's clock, or the caller's now) decides; the key's native expiry,
-- on the server's own clock, comes CACHE_GRACE seconds later and only frees the memory.
-- So a caller's now never makes an entry vanish early, and none piles up for ever.

local CACHE_GRACE = 60
local now = clock(ARGV[2])
local key, ttl = K.cache(ARGV[3]), tonumber(ARGV[5])
if ARGV[6] == 'add' then
  local expires_at = redis.call('HGET', key, 'expires_at')
  if expires_at and tonumber(expires_at) > now then
    return 0
  end
end
redis.call('HSET', key, 'value', ARGV[4], 'expires_at', fmt(now + ttl))
redis.call('PEXPIRE', key, fmt_int(math.ceil((ttl + CACHE_GRACE) * 1000)))
return 1
