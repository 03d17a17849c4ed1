-- job_wait_end.lua: the end of a worker's wait (job_wait_begin.lua): it leaves the
-- queues' waiters, and claims as job_claim.lua does.
--
-- Pipelined behind the worker's BLPOP on its wake list: the server runs it when the pop
-- returns (a wake-up, or the timeout), so the jobs come back with the wake-up. If the
-- worker is gone meanwhile (its connection closed), it never runs: nothing was leased.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, worker_id, limit, queue... (as job_claim.lua)
-- Returns: job_claim.lua's reply
-- Touches: {p}:q:{queue}:waiters, {p}:wwake:{worker}, and what job_claim.lua touches
-- Parts:   job_claim

local worker = ARGV[3]
for i = 5, #ARGV do
  redis.call('ZREM', K.waiters(ARGV[i]), worker)
end
redis.call('DEL', K.wait_list(worker))
return job_claim(ARGV)
