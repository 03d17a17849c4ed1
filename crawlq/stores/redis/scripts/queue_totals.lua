-- queue_totals.lua: the totals of every queue that has or had jobs (counters that only
-- grow, kept by the scripts that change jobs next to the state counts).
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix
-- Returns: {queue, enqueued, completed, retried, dead_lettered}... (0 where absent).
-- Touches: {p}:queues, {p}:q:{queue}:counts (read only)

local totals = {}
for _, queue in ipairs(redis.call('SMEMBERS', K.queues())) do
  local n = redis.call('HMGET', K.counts(queue), 'total_enqueued', 'total_completed',
    'total_retried', 'total_dead_lettered')
  totals[#totals + 1] = {queue, tonumber(n[1]) or 0, tonumber(n[2]) or 0,
    tonumber(n[3]) or 0, tonumber(n[4]) or 0}
end
return totals
