-- worker_register.lua: insert or replace a worker's record, alive, started and last
-- heartbeat now (Store.worker_register).
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, id, host, pid, queues (JSON list), runtime, concurrency,
--          running, done, failed, rss_bytes? ('' = None), process? ('' = None)
-- Returns: the instant it used.
-- Touches: {p}:w:{worker}, {p}:workers, {p}:workers:alive, {p}:workers:ended

local now = clock(ARGV[2])
local id = ARGV[3]
local key = K.worker(id)
redis.call('DEL', key)
redis.call('HSET', key, 'host', ARGV[4], 'pid', ARGV[5], 'queues', ARGV[6],
  'runtime', ARGV[7], 'concurrency', ARGV[8], 'started_at', fmt(now),
  'last_heartbeat', fmt(now), 'running', ARGV[9], 'done', ARGV[10], 'failed', ARGV[11],
  'state', 'alive')
local rss = opt(ARGV[12])
if rss then
  redis.call('HSET', key, 'rss_bytes', rss)
end
local process = opt(ARGV[13])
if process then
  redis.call('HSET', key, 'process', process)
end
redis.call('ZADD', K.workers(), fmt(now), id)
redis.call('ZADD', K.workers_alive(), fmt(now), id)
redis.call('ZREM', K.workers_ended(), id)
return fmt(now)
