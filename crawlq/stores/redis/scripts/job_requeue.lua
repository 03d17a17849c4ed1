-- job_requeue.lua: make matching dead jobs pending, due now, with fresh attempts; one
-- page of the filter at a time. A dead job whose key is live again, or whose crawl is
-- closed, stays dead. A requeued keyed job waits behind its limit key's front.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, then the 11 filter arguments (read_filter; states = dead)
-- Returns: {cursor, done, matched, {id...}}: as job_list.lua, with the ids requeued.
-- Touches: {p}:jobs, {p}:job:{id}, {p}:q:{queue}:dead, :counts, :keys, :prios,
--          :p:{priority}, {p}:crawl:{crawl}, {p}:cpend:{crawl}, {p}:limit:{lkey},
--          {p}:lwait:{lkey}, {p}:limitkeys

local now = clock(ARGV[2])
local requeued = {}
local cursor, done, matched = scan(read_filter(3), function(id)
  local job = load(id)
  if job.key and redis.call('HEXISTS', K.keys(job.queue), job.key) == 1 then
    return
  end
  if job.crawl and not crawl_open(job.crawl) then
    return
  end
  redis.call('ZREM', K.finished(job.queue, 'dead'), id)
  redis.call('HSET', K.job(id), 'state', 'pending', 'attempts', '0', 'run_at', fmt(now))
  redis.call('HDEL', K.job(id), 'finished_at', 'dead_reason', 'lease_token',
    'lease_expires_at', 'worker_id')
  move(job, 'dead', 'pending')
  if job.key then
    redis.call('HSET', K.keys(job.queue), job.key, id)
  end
  job.run_at = now
  if job.crawl or job.lkey then
    enter_pending(job)
    place(job)
  else
    pending_add(job.queue, job.priority, now, id)
  end
  requeued[#requeued + 1] = id
end)
commit(now)
return {cursor, done, matched, requeued}
