-- queue_stats.lua: the counts of every queue that has or had jobs, without scanning jobs.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now
-- Returns: {now, {queue, pending, running, done, dead, cancelled, due, oldest_due_run_at
--          ('' if none), done_last_minute, waiting, held}...}; now and times as %.17g
--          text. pending includes waiting and held; due counts the claim index only.
-- Touches: {p}:queues, {p}:q:{queue}:counts, :prios, :p:{priority}, :done (read only)

local now = clock(ARGV[2])
local due_until = fmt(now)
local stats = {}
for _, queue in ipairs(redis.call('SMEMBERS', K.queues())) do
  local n = redis.call('HMGET', K.counts(queue), 'pending', 'running', 'done', 'dead',
    'cancelled', 'waiting', 'held')
  local due, oldest = 0, nil
  each_level(queue, function(level)
    due = due + redis.call('ZCOUNT', level, '-inf', due_until)
    local head = redis.call('ZRANGE', level, 0, 0, 'WITHSCORES')
    local t = tonumber(head[2])
    if t ~= nil and t <= now and (oldest == nil or t < oldest) then
      oldest = t
    end
    return false
  end)
  local recent = redis.call('ZCOUNT', K.finished(queue, 'done'), fmt(now - 60), '+inf')
  stats[#stats + 1] = {
    queue, tonumber(n[1]) or 0, tonumber(n[2]) or 0, tonumber(n[3]) or 0,
    tonumber(n[4]) or 0, tonumber(n[5]) or 0, due, oldest and fmt(oldest) or '', recent,
    tonumber(n[6]) or 0, tonumber(n[7]) or 0,
  }
end
return {fmt(now), stats}
