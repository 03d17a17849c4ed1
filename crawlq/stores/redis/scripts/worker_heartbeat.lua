-- worker_heartbeat.lua: record an alive worker's counters and last heartbeat
-- (Store.worker_heartbeat). An unknown, stopped or dead worker changes nothing.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, id, running, done, failed, rss_bytes? ('' = None)
-- Returns: 1 if recorded, else 0.
-- Touches: {p}:w:{worker}, {p}:workers:alive

local key, now, id = alive_worker()
if not key then
  return 0
end
redis.call('HSET', key, 'last_heartbeat', fmt(now), 'running', ARGV[4], 'done', ARGV[5],
  'failed', ARGV[6])
local rss = opt(ARGV[7])
if rss then
  redis.call('HSET', key, 'rss_bytes', rss)
else
  redis.call('HDEL', key, 'rss_bytes')
end
redis.call('ZADD', K.workers_alive(), fmt(now), id)
return 1
