-- job_next_gated.lua: the earliest run_at, no later than now + within, of the claim-index
-- jobs of some queues that are due by their own run_at and kept back by their limit key's
-- gate (a key front with own_run_at set aside, see keys.py). Looks at each priority's jobs
-- due until then in run_at order, and stops at the first such front.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now ('' = the server's clock), within (seconds), queue...
-- Returns: run_at as %.17g text, or '' if none.
-- Touches: {p}:q:{queue}:prios, {p}:q:{queue}:p:{priority}, {p}:job:{id} (read only)

local now = clock(ARGV[2])
local first = nil
for i = 4, #ARGV do
  each_level(ARGV[i], function(level)
    local bound = now + tonumber(ARGV[3])
    if first ~= nil and first < bound then
      bound = first
    end
    local due = redis.call('ZRANGEBYSCORE', level, '-inf', fmt(bound), 'WITHSCORES')
    for j = 1, #due, 2 do
      local own = tonumber(redis.call('HGET', K.job(member_id(due[j])), 'own_run_at'))
      if own ~= nil and own <= now then
        first = tonumber(due[j + 1])
        break
      end
    end
    return false
  end)
end
return first and fmt(first) or ''
