-- limit_read.lua: the state of some limit keys (limit_get), or of the keys after a name
-- in key order (limit_list).
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now (unused), mode ('get' or 'list'), then for get: key...; for
--          list: after ('' = from the first), limit
-- Returns: per key, {key, max_running, min_interval, source, blocked_until, running,
--          last_start, pending, next_start} ('' for None), or {} for a key without a
--          record (get only).
-- Touches: {p}:limitkeys, {p}:limit:{lkey}, {p}:job:{id} (read only)

local names = {}
if ARGV[3] == 'get' then
  for i = 4, #ARGV do
    names[#names + 1] = ARGV[i]
  end
else
  local after = ARGV[4]
  names = redis.call('ZRANGEBYLEX', K.limit_keys(), after == '' and '-' or '(' .. after,
    '+', 'LIMIT', 0, tonumber(ARGV[5]))
end
local rows = {}
for n, lkey in ipairs(names) do
  local v = redis.call('HMGET', K.limit(lkey), 'source', 'max_running', 'min_interval',
    'blocked_until', 'running', 'last_start', 'pending', 'front')
  if v[1] then
    local next_start = v[8] and redis.call('HGET', K.job(v[8]), 'run_at')
    rows[n] = {lkey, v[2] or '', v[3] or '0', v[1], v[4] or '', v[5] or '0', v[6] or '',
      v[7] or '0', next_start or ''}
  else
    rows[n] = {}
  end
end
return rows
