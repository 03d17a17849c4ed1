-- job_expire_leases.lua: return running jobs whose lease expired (lease_expires_at < now):
-- pending again with attempts left, else dead with reason lease_expired.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now
-- Returns: the ids returned, in id order.
-- Touches: {p}:running, {p}:wjobs:{worker}, {p}:job:{id}, {p}:followup:{id}, {p}:q:{queue}:dead, :counts,
--          :keys, :prios, :p:{priority}, and job_schedule.lua's keys (followups)
--          crawls: {p}:crawl:{crawl}, {p}:cpend:{crawl}; limits: {p}:limit:{lkey},
--          {p}:lwait:{lkey} (a finished crawl schedules its on_finish)

local now = clock(ARGV[2])
local expired = redis.call('ZRANGEBYSCORE', K.running(), '-inf', '(' .. fmt(now))
table.sort(expired, by_id)
local message = 'lease expired: the worker holding it stopped heartbeating'
for _, id in ipairs(expired) do
  take_back(load(id), now, message, 'lease_expired')
end
commit(now)
return expired
