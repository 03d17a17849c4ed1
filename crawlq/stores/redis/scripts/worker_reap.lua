-- worker_reap.lua: declare dead every alive worker whose last heartbeat is older than
-- now - dead_after, and every alive worker named gone, and return each running job it
-- holds at once, as job_expire_leases returns an expired lease (pending again with
-- attempts left, else dead with reason worker_lost). Their lease tokens are cleared: the
-- dead worker's acks are stale.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, dead_after, gone... (worker ids)
-- Returns: the ids of the workers declared dead, sorted.
-- Touches: {p}:workers:alive, {p}:workers:ended, {p}:w:{worker}, {p}:wjobs:{worker},
--          and everything job_expire_leases.lua touches
--          crawls: {p}:crawl:{crawl}, {p}:cpend:{crawl}; limits: {p}:limit:{lkey},
--          {p}:lwait:{lkey} (a finished crawl schedules its on_finish)

local now = clock(ARGV[2])
local cutoff = now - tonumber(ARGV[3])
local dead = redis.call('ZRANGEBYSCORE', K.workers_alive(), '-inf', '(' .. fmt(cutoff))
local named = {}
for _, worker in ipairs(dead) do
  named[worker] = true
end
for i = 4, #ARGV do
  local worker = ARGV[i]
  if not named[worker] and redis.call('ZSCORE', K.workers_alive(), worker) then
    named[worker] = true
    dead[#dead + 1] = worker
  end
end
table.sort(dead)
local message =
  'worker lost: the worker holding it was declared dead (heartbeat overdue or process gone)'
for _, worker in ipairs(dead) do
  redis.call('HSET', K.worker(worker), 'state', 'dead', 'stopped_at', fmt(now))
  redis.call('ZREM', K.workers_alive(), worker)
  redis.call('ZADD', K.workers_ended(), fmt(now), worker)
  local held = redis.call('SMEMBERS', K.worker_jobs(worker))
  table.sort(held, by_id)
  for _, id in ipairs(held) do
    local job = load(id)
    if job ~= nil and job.state == 'running' and job.worker == worker then
      take_back(job, now, message, 'worker_lost')
    end
  end
  redis.call('DEL', K.worker_jobs(worker))
end
commit(now)
return dead
