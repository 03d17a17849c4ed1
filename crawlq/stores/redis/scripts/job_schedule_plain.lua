-- job_schedule_plain.lua: schedule plain jobs, the common case of Store.job_schedule.
--
-- A plain job has no unique key, no crawl, no limit key and no fingerprint: it is always
-- created, goes straight to the claim index, and none of job_schedule.lua's checks and
-- merges apply. This writes exactly what job_schedule.lua's insert() writes for such a
-- job (the same fields in the same order, the same counts and wake-ups), without the
-- JSON spec list and the per-spec bookkeeping it does not need. jobs.py sends a batch
-- here only when every spec in it is plain.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, then 10 per spec: queue, task, args (JSON), kwargs (JSON),
--          priority (decimal), run_at ('' = now + delay), delay, max_attempts (decimal),
--          lease_seconds (%.17g text), timeout ('' = none, else %.17g text)
-- Returns: the new job ids, in spec order (every outcome is created)
-- Touches: {p}:ids, {p}:jobs, {p}:job:{id}, {p}:queues, {p}:q:{queue}:counts, :prios,
--          :p:{priority}; publishes {p}:wake:{queue} and pushes to its waiters

local now = clock(ARGV[2])
local created_at = fmt(now)
local ids = {}
for i = 3, #ARGV, 10 do
  local queue, priority, run_at = ARGV[i], ARGV[i + 4], ARGV[i + 5]
  if run_at == '' then
    run_at = now + tonumber(ARGV[i + 6])
  else
    run_at = tonumber(run_at)
  end
  local id = redis.call('INCR', K.ids())
  local sid = fmt_int(id)
  local timeout = ARGV[i + 9]
  if timeout == '' then
    redis.call('HSET', K.job(sid), 'queue', queue, 'state', 'pending', 'attempts', '0',
      'created_at', created_at, 'task', ARGV[i + 1], 'args', ARGV[i + 2],
      'kwargs', ARGV[i + 3], 'priority', priority, 'run_at', fmt(run_at),
      'max_attempts', ARGV[i + 7], 'lease_seconds', ARGV[i + 8])
  else
    redis.call('HSET', K.job(sid), 'queue', queue, 'state', 'pending', 'attempts', '0',
      'created_at', created_at, 'task', ARGV[i + 1], 'args', ARGV[i + 2],
      'kwargs', ARGV[i + 3], 'priority', priority, 'run_at', fmt(run_at),
      'max_attempts', ARGV[i + 7], 'lease_seconds', ARGV[i + 8], 'timeout', timeout)
  end
  listed(queue, sid)
  pending_add(queue, priority, run_at, sid)
  ids[#ids + 1] = id
end
commit(now)
return ids
