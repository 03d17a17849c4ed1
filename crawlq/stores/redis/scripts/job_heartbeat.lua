-- job_heartbeat.lua: extend leases by their job's lease_seconds from now.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, then id, token per lease
-- Returns: 1 per lease extended, 0 per stale lease, in order.
-- Touches: {p}:job:{id}, {p}:running

local now = clock(ARGV[2])
local answers = {}
for i = 3, #ARGV, 2 do
  local job = leased(ARGV[i], ARGV[i + 1])
  if job then
    local expires = fmt(now + job.lease_seconds)
    redis.call('HSET', K.job(job.id), 'lease_expires_at', expires)
    redis.call('ZADD', K.running(), expires, job.id)
  end
  answers[#answers + 1] = job and 1 or 0
end
return answers
