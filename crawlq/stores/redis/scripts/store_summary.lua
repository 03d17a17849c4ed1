-- store_summary.lua: crawls by state with the jobs they ended, limit keys and those
-- blocked at now (store_summary).
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now
-- Returns: a JSON object {running, paused, finished, cancelled, job_done, job_dead,
--          job_cancelled, keys, blocked}: counts.
-- Touches: {p}:crawls, {p}:crawl:{id}, {p}:limitkeys, {p}:limit:{lkey} (read only)

local now = clock(ARGV[2])
local out = {running = 0, paused = 0, finished = 0, cancelled = 0, job_done = 0,
  job_dead = 0, job_cancelled = 0, keys = 0, blocked = 0}
for _, id in ipairs(redis.call('ZRANGE', K.crawls(), 0, -1)) do
  local v = redis.call('HMGET', K.crawl(id), 'state', 'done', 'dead', 'cancelled')
  if v[1] then
    out[v[1]] = (out[v[1]] or 0) + 1
    out.job_done = out.job_done + (tonumber(v[2]) or 0)
    out.job_dead = out.job_dead + (tonumber(v[3]) or 0)
    out.job_cancelled = out.job_cancelled + (tonumber(v[4]) or 0)
  end
end
for _, lkey in ipairs(redis.call('ZRANGE', K.limit_keys(), 0, -1)) do
  local blocked = redis.call('HGET', K.limit(lkey), 'blocked_until')
  if redis.call('EXISTS', K.limit(lkey)) == 1 then
    out.keys = out.keys + 1
    if blocked and tonumber(blocked) > now then
      out.blocked = out.blocked + 1
    end
  end
end
return cjson.encode(out)
