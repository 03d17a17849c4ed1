-- job_finish_wait.lua: mark a job as waited for (crawlq.stores.finished) and read its
-- state, atomically. The caller has subscribed to {p}:fdone:{id} before: if the job
-- finishes after this, finish() in the prelude publishes there.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, id, seconds the wait lasts, seconds the mark outlives it
-- Returns: the job's state, '' if there is no such job.
-- Touches: {p}:fwait:{id} (set to the wait's end unless it already ends later)

local now = clock(ARGV[2])
local id = ARGV[3]
local state = redis.call('HGET', K.job(id), 'state')
if not state then
  return ''
end
if state == 'done' or state == 'dead' or state == 'cancelled' then
  return state
end
local wait = tonumber(ARGV[4])
local mark = K.finish_wait(id)
local ends = tonumber(redis.call('GET', mark))
if ends == nil or now + wait > ends then
  local ttl = math.ceil((wait + tonumber(ARGV[5])) * 1000)
  redis.call('SET', mark, fmt(now + wait), 'PX', ttl)
end
return state
