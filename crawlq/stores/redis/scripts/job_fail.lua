-- job_fail.lua: record failed attempts: pending again after a delay, or dead.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, then per failure: id, token, error, retry_delay? ('' = dead),
--          reason (the dead_reason when dead), records ('' for none, else a JSON list
--          as keep_records reads it: kept only if the lease is current)
-- Returns: 1 per failure applied, 0 per stale lease, in order.
-- Touches: {p}:job:{id}, {p}:followup:{id}, {p}:running, {p}:wjobs:{worker},
--          {p}:q:{queue}:dead, :counts, :keys, :prios, :p:{priority}, and
--          job_schedule.lua's keys (followups), result_add.lua's keys (records)
--          crawls: {p}:crawl:{crawl}, {p}:cpend:{crawl}; limits: {p}:limit:{lkey},
--          {p}:lwait:{lkey} (a finished crawl schedules its on_finish)

local now = clock(ARGV[2])
local answers = {}
for i = 3, #ARGV, 6 do
  local job = leased(ARGV[i], ARGV[i + 1])
  local message, delay, reason = ARGV[i + 2], opt_number(ARGV[i + 3]), ARGV[i + 4]
  if job and delay == nil then
    finish(job, 'dead', now, {'last_error', message, 'dead_reason', reason})
  elseif job then
    retry(job, now + delay, message)
  end
  if job and ARGV[i + 5] ~= '' then
    keep_records(cjson.decode(ARGV[i + 5]))
  end
  answers[#answers + 1] = job and 1 or 0
end
commit(now)
return answers
