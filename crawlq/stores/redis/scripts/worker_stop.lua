-- worker_stop.lua: a clean exit: an alive worker becomes stopped, with its final
-- counters (Store.worker_stop).
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, id, done, failed
-- Returns: 1 if it was alive, else 0 (a dead or unknown worker is left as it is).
-- Touches: {p}:w:{worker}, {p}:workers:alive, {p}:workers:ended

local key, now, id = alive_worker()
if not key then
  return 0
end
redis.call('HSET', key, 'state', 'stopped', 'stopped_at', fmt(now), 'running', '0',
  'done', ARGV[4], 'failed', ARGV[5])
redis.call('ZREM', K.workers_alive(), id)
redis.call('ZADD', K.workers_ended(), fmt(now), id)
return 1
