-- worker_prune.lua: delete stopped and dead workers that ended before now - older_than.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, older_than
-- Returns: how many were deleted.
-- Touches: {p}:workers, {p}:workers:ended, {p}:w:{worker}, {p}:wjobs:{worker}

local now = clock(ARGV[2])
local before = now - tonumber(ARGV[3])
local ended = redis.call('ZRANGEBYSCORE', K.workers_ended(), '-inf', '(' .. fmt(before))
for _, worker in ipairs(ended) do
  redis.call('DEL', K.worker(worker), K.worker_jobs(worker))
  redis.call('ZREM', K.workers(), worker)
  redis.call('ZREM', K.workers_ended(), worker)
end
return #ended
