-- periodic_fire.lua: apply planned fires of due schedules (PeriodicStore.
-- periodic_fire_due). A firing applies only if its schedule still has the planned
-- revision and next_fire and is not paused; then the schedule moves to the planned next
-- fire time, and if HSETNX records the fire time in the ledger (the unique write) a
-- 'fired' firing schedules its job as job_schedule does. All in this one script.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, firings: JSON [[name, fire_at, revision, next_fire, outcome,
--          spec row or null (see spec_from in the prelude)], ...]
-- Returns: JSON [[name, fire_at, outcome, job id or false, fired_at], ...] of the
--          firings applied, in order (times as %.17g text: cjson rounds numbers).
-- Touches: {p}:periodic:s:{schedule}, {p}:periodic:due, {p}:periodic:f:{schedule},
--          {p}:periodic:t:{schedule}, and what job_schedule.lua touches

local now = clock(ARGV[2])
local records = {}
for _, f in ipairs(cjson.decode(ARGV[3])) do
  local name, fire_at, revision, next_fire, outcome, row = f[1], f[2], f[3], f[4], f[5], f[6]
  local key = K.periodic(name)
  local v = redis.call('HMGET', key, 'revision', 'paused', 'next_fire')
  if v[1] and tonumber(v[1]) == revision and v[2] == '0' and tonumber(v[3]) == fire_at then
    local at = fmt(fire_at)
    redis.call('HSET', key, 'next_fire', fmt(next_fire), 'last_fire', at,
               'updated_at', fmt(now))
    redis.call('ZADD', K.periodic_due(), next_fire, name)
    if redis.call('HSETNX', K.periodic_fires(name), at, '') == 1 then
      local job = false
      if outcome == 'fired' and row ~= cjson.null then
        job = schedule(spec_from(row, now), now)
        redis.call('HSET', key, 'last_job', job)
      end
      redis.call('HSET', K.periodic_fires(name), at, cjson.encode({outcome, job, fmt(now)}))
      redis.call('ZADD', K.periodic_times(name), fire_at, at)
      records[#records + 1] = {name, at, outcome, job, fmt(now)}
    end
  end
end
commit(now)
return cjson.encode(records)
