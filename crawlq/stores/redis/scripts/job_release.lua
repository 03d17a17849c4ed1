-- job_release.lua: give leased jobs back as pending, returning their claim's attempt.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, then per release: id, token, delay (<= 0: keep run_at)
-- Returns: 1 per release applied, 0 per stale lease, in order.
-- Touches: {p}:job:{id}, {p}:running, {p}:wjobs:{worker}, {p}:q:{queue}:counts,
--          :prios, :p:{priority}
--          crawls: {p}:crawl:{crawl}, {p}:cpend:{crawl}; limits: {p}:limit:{lkey},
--          {p}:lwait:{lkey} (a finished crawl schedules its on_finish)

local now = clock(ARGV[2])
local answers = {}
for i = 3, #ARGV, 3 do
  local job = leased(ARGV[i], ARGV[i + 1])
  local delay = tonumber(ARGV[i + 2])
  if job then
    local run_at = job.run_at
    if delay > 0 then
      run_at = now + delay
    end
    redis.call('HINCRBY', K.job(job.id), 'attempts', -1)
    back_to_pending(job, run_at, {})
  end
  answers[#answers + 1] = job and 1 or 0
end
commit(now)
return answers
