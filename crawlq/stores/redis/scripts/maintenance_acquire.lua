-- maintenance_acquire.lua: take or renew the named lease on a maintenance duty
-- (Store.maintenance_acquire): owner holds it until now + ttl if it was free, expired
-- or already its own; another owner's unexpired lease is left as it is.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, duty, owner, ttl
-- Returns: 1 if owner holds the duty now, else 0.
-- Touches: {p}:duty:{duty}

local now = clock(ARGV[2])
local key = K.duty(ARGV[3])
local owner, ttl = ARGV[4], tonumber(ARGV[5])
local v = redis.call('HMGET', key, 'owner', 'expires_at')
if v[1] and v[1] ~= owner and tonumber(v[2]) > now then
  return 0
end
redis.call('HSET', key, 'owner', owner, 'expires_at', fmt(now + ttl))
return 1
