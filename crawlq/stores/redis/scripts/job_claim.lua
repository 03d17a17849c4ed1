-- job_claim.lua: lease up to `limit` due pending jobs of some queues (Store.job_claim).
--
-- Claim order: priority desc, run_at asc, id asc, across all the asked queues; a job is
-- never claimed before its run_at. Each claim counts an attempt and issues a new token.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, worker_id, limit, queue...
-- Returns: a JSON list of [id, [field, value, ...]] per leased job, in claim order.
-- A claimed front (keyed job) counts as running for its key, sets its last_start and
-- lets the key's next waiting job become its front (reconcile in the prelude); while
-- room remains after such a round, the claim looks again. Jobs without a crawl or limit
-- key take one round, as before.
-- Touches: {p}:q:{queue}:prios, {p}:q:{queue}:p:{priority}, {p}:q:{queue}:counts,
--          {p}:job:{id}, {p}:running, {p}:wjobs:{worker}, {p}:seq, {p}:cpend:{crawl},
--          {p}:limit:{lkey}, {p}:lwait:{lkey}; crawl counters at commit

local now = clock(ARGV[2])
local worker, limit = ARGV[3], tonumber(ARGV[4])
local due_until = fmt(now)

-- The best `want` due jobs of each asked queue, in claim order.
local function candidates_for(want)
  local candidates, asked = {}, {}
  for i = 5, #ARGV do
    local queue = ARGV[i]
    if not asked[queue] then
      asked[queue] = true
      local got = 0
      each_level(queue, function(level, priority)
        local rows = redis.call('ZRANGEBYSCORE', level, '-inf', due_until, 'WITHSCORES',
          'LIMIT', 0, want - got)
        for j = 1, #rows, 2 do
          candidates[#candidates + 1] = {
            queue = queue, priority = priority, p = tonumber(priority),
            run_at = tonumber(rows[j + 1]), id = member_id(rows[j]),
          }
          got = got + 1
        end
        return got >= want
      end)
    end
  end
  table.sort(candidates, claim_before)
  return candidates
end

local leased_jobs, running, held = {}, {}, {}
local unpending = {}  -- crawl -> ids leaving its pending set
local seed = nil
local started = fmt(now)

-- Rounds: claim the best due jobs; a claimed keyed job may make a new front of its key
-- due now, so while room remains after such a round, look again.
while #leased_jobs < limit do
  local candidates = candidates_for(limit - #leased_jobs)
  if #candidates == 0 then
    break
  end
  if seed == nil then
    -- Lease tokens: unique per claim (server time and a counter), then per job (rank).
    local t = redis.call('TIME')
    local claim_id = t[1] .. '.' .. t[2] .. ':' .. redis.call('INCR', K.seq())
    seed = string.sub(redis.sha1hex(claim_id), 1, 12)
  end
  local levels, keyed = {}, {}
  for n = 1, math.min(limit - #leased_jobs, #candidates) do
    local c = candidates[n]
    local rank = #leased_jobs + 1
    local key = K.job(c.id)
    local flat = redis.call('HGETALL', key)
    local job = {}
    for j = 1, #flat, 2 do
      job[flat[j]] = flat[j + 1]
    end
    local expires = fmt(now + tonumber(job.lease_seconds))
    local changes = {
      state = 'running', attempts = fmt_int(tonumber(job.attempts) + 1), worker_id = worker,
      lease_token = seed .. string.format('%04x', rank),
      lease_expires_at = expires, started_at = started,
    }
    local fields = {}
    for field, value in pairs(changes) do
      fields[#fields + 1] = field
      fields[#fields + 1] = value
      job[field] = value
    end
    redis.call('HSET', key, unpack(fields))
    running[#running + 1] = expires
    running[#running + 1] = c.id
    held[#held + 1] = c.id
    local level = c.queue .. '\n' .. c.priority
    if levels[level] == nil then
      levels[level] = {queue = c.queue, priority = c.priority, ids = {}}
    end
    table.insert(levels[level].ids, c.id)
    local crawl = job.crawl_id
    move({queue = c.queue, crawl = crawl}, 'pending', 'running')
    if crawl then
      unpending[crawl] = unpending[crawl] or {}
      table.insert(unpending[crawl], c.id)
    end
    if job.limit_key then
      -- the front starts: the key counts it running and has no front until reconciled
      if job.own_run_at then
        redis.call('HDEL', key, 'own_run_at')
        job.own_run_at = nil
      end
      keyed[#keyed + 1] = job.limit_key
    end
    local reply = {}
    for field, value in pairs(job) do
      reply[#reply + 1] = field
      reply[#reply + 1] = value
    end
    leased_jobs[rank] = {c.id, reply}
  end
  for _, level in pairs(levels) do
    pending_remove_many(level.queue, level.priority, level.ids)
  end
  if #keyed == 0 then
    break
  end
  for _, lkey in ipairs(keyed) do
    limit_add(lkey, 'running', 1)
    limit_add(lkey, 'pending', -1)
    limit_put(lkey, 'last_start', started)
    limit_put(lkey, 'front', nil)
    reconcile(lkey)
  end
end
if #leased_jobs == 0 then
  return '[]'
end
call_many('ZADD', K.running(), running)
call_many('SADD', K.worker_jobs(worker), held)
for crawl, ids in pairs(unpending) do
  call_many('SREM', K.crawl_pending(crawl), ids)
end
commit(now)
return encode_list(leased_jobs)
