-- periodic_read.lua: read periodic schedules (PeriodicStore.periodic_get, _list,
-- _next, _fires, and the due read of periodic_fire_due).
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, what, then per what:
--          'get' name | 'list' | 'due' limit seed | 'next' | 'fires' name limit
-- Returns: JSON, times as %.17g text. get, list, due: {now, [schedule, ...]}, a schedule being the flat
--          fields of its hash plus name and live (its last job pending or running);
--          next: the earliest next_fire or false; fires: [[fire_at, record], ...] of
--          the latest limit fire times, in order.
-- Touches: {p}:periodic:s:{schedule}, {p}:periodic:due, {p}:periodic:names,
--          {p}:periodic:f:{schedule}, {p}:periodic:t:{schedule}, {p}:job:{id} (read only)

local now = clock(ARGV[2])
local what = ARGV[3]

local function schedule_of(name)
  local flat = redis.call('HGETALL', K.periodic(name))
  if #flat == 0 then
    return nil
  end
  local h = {}
  for i = 1, #flat, 2 do
    h[flat[i]] = flat[i + 1]
  end
  h.name = name
  h.live = false
  if h.last_job then
    local state = redis.call('HGET', K.job(h.last_job), 'state')
    h.live = state == 'pending' or state == 'running'
  end
  return h
end

local function all_of(names)
  local out = {}
  for _, name in ipairs(names) do
    local h = schedule_of(name)
    if h then
      out[#out + 1] = h
    end
  end
  return cjson.encode({fmt(now), out})
end

if what == 'get' then
  return all_of({ARGV[4]})
elseif what == 'list' then
  return all_of(redis.call('ZRANGE', K.periodic_names(), 0, -1))
elseif what == 'due' then
  -- a window of the due schedules starting at a spot picked from the caller's seed, so
  -- that concurrent schedulers mostly take different ones
  local limit, seed = tonumber(ARGV[4]), tonumber(ARGV[5])
  local due = redis.call('ZCOUNT', K.periodic_due(), '-inf', fmt(now))
  local offset = 0
  if due > limit then
    offset = seed % (due - limit + 1)
  end
  return all_of(redis.call('ZRANGEBYSCORE', K.periodic_due(), '-inf', fmt(now),
                           'LIMIT', offset, limit))
elseif what == 'next' then
  local first = redis.call('ZRANGE', K.periodic_due(), 0, 0, 'WITHSCORES')
  return cjson.encode(first[2] or false)
end
-- fires
local name, limit = ARGV[4], tonumber(ARGV[5])
local times = redis.call('ZRANGE', K.periodic_times(name), -limit, -1)
local out = {}
for n, t in ipairs(times) do
  out[n] = {t, redis.call('HGET', K.periodic_fires(name), t)}
end
return cjson.encode(out)
