-- job_wait_begin.lua: a worker starts to wait for jobs of some queues, and learns when
-- the first pending one is due (RedisWaiting._job_wait_claim).
--
-- The worker joins each queue's waiters until `seconds` from now, and its wake list is
-- emptied. While it is there, every script that makes jobs of those queues pending
-- pushes their earliest run_at onto that list (wake_waiters in the prelude, at commit).
-- The worker blocks on the list (BLPOP) with job_wait_end.lua pipelined behind it, so
-- the server claims for it as soon as the pop returns: the wake-up and the claim are one
-- round trip. Registering and reading the first run_at in one script leaves no gap in
-- which a new job could go unannounced.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now (unused: the clock is always Redis TIME), worker_id, seconds,
--          queue...
-- Returns: {run_at or '', now}, both as %.17g text (as job_next_due.lua).
-- Touches: {p}:q:{queue}:waiters, {p}:wwake:{worker}; reads the queues' pending index

local now = clock('')
local worker, until_ = ARGV[3], now + tonumber(ARGV[4])
redis.call('DEL', K.wait_list(worker))
local first = nil
for i = 5, #ARGV do
  redis.call('ZADD', K.waiters(ARGV[i]), fmt(until_), worker)
  local t = first_run_at(ARGV[i])
  if t ~= nil and (first == nil or t < first) then
    first = t
  end
end
return {first and fmt(first) or '', fmt(now)}
