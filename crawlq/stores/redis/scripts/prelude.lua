-- prelude.lua: the helpers every script shares (Redis scripts cannot call each other).
--
-- The store prepends, in this order: `local PREFIX = ARGV[1]`, the key builders K.*
-- generated from crawlq/stores/redis/keys.py, this file; then the script itself.
-- Every script takes ARGV[1] = key prefix and ARGV[2] = now ('' = Redis TIME).
--
-- Conventions: ids, priorities and max_attempts travel as canonical decimal text; times
-- and other floats are Lua numbers, written with %.17g so they read back exactly. An
-- optional string argument is '' for None and '=' .. value otherwise. Batches of job
-- specs arrive as one JSON argument, and whole jobs go back as one JSON string, which
-- keeps both sides' protocol work per job small.
--
-- A script must never fail after its first write: Redis does not roll a script back.
-- The store validates and encodes everything in Python before calling.

local function fmt(n)
  return string.format('%.17g', n)
end

local function fmt_int(n)
  return string.format('%d', n)
end

local function opt(s)
  if s == nil or s == '' then
    return nil
  end
  return string.sub(s, 2)
end

local function opt_number(s)
  local v = opt(s)
  if v == nil then
    return nil
  end
  return tonumber(v)
end

local function split(s)
  local out = {}
  for part in string.gmatch(s, '[^,]+') do
    out[#out + 1] = part
  end
  return out
end

-- redis.call(command, key, items...) in chunks: unpack() stops at a few thousand values.
local function call_many(command, key, items)
  for i = 1, #items, 1000 do
    redis.call(command, key, unpack(items, i, math.min(i + 999, #items)))
  end
end

local function null(v)
  if v == cjson.null then
    return nil
  end
  return v
end

-- A list as JSON text (cjson would write an empty table as an object, {}).
local function encode_list(t)
  if #t == 0 then
    return '[]'
  end
  return cjson.encode(t)
end

local function clock(arg)
  if arg ~= nil and arg ~= '' then
    return tonumber(arg)
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

-- -- what a script writes once at its end: counts, wake-ups -----------------------------

local WAKE = {}
local COUNTS = {}

-- A queue got a pending job due at run_at: its wake-up carries the earliest such time.
local function wake(queue, run_at)
  local earliest = WAKE[queue]
  if earliest == nil or run_at < earliest then
    WAKE[queue] = run_at
  end
end

local function count(queue, state, delta)
  local per_queue = COUNTS[queue]
  if per_queue == nil then
    per_queue = {}
    COUNTS[queue] = per_queue
  end
  per_queue[state] = (per_queue[state] or 0) + delta
end

-- Every script that changes jobs ends with commit(): it writes the count changes and
-- publishes one wake-up per queue that got a pending job, saying when it is due.
local function commit()
  for queue, per_queue in pairs(COUNTS) do
    for state, delta in pairs(per_queue) do
      if delta ~= 0 then
        redis.call('HINCRBY', K.counts(queue), state, delta)
      end
    end
  end
  for queue, run_at in pairs(WAKE) do
    redis.call('PUBLISH', K.wake(queue), fmt(run_at))
  end
end

local function move_count(queue, from, to)
  count(queue, from, -1)
  count(queue, to, 1)
end

-- -- the pending index: per queue, priorities, then one zset per priority by run_at ---

-- "a7", "b42", ... "p" .. 16 digits: members of equal score sort by id.
local function member(id)
  return string.char(96 + #id) .. id
end

local function member_id(m)
  return string.sub(m, 2)
end

local PRIOS = {}  -- queue .. '\n' .. priority -> true once in {p}:q:{queue}:prios

local function pending_add(queue, priority, run_at, id)
  redis.call('ZADD', K.level(queue, priority), fmt(run_at), member(id))
  local known = queue .. '\n' .. priority
  if not PRIOS[known] then
    redis.call('ZADD', K.prios(queue), fmt(-tonumber(priority)), priority)
    PRIOS[known] = true
  end
  wake(queue, run_at)
end

-- Take pending jobs of one queue and priority out of the index (a priority left with
-- no job is dropped from the queue's priorities).
local function pending_remove_many(queue, priority, ids)
  local level = K.level(queue, priority)
  local members = {}
  for n, id in ipairs(ids) do
    members[n] = member(id)
  end
  call_many('ZREM', level, members)
  if redis.call('EXISTS', level) == 0 then
    redis.call('ZREM', K.prios(queue), priority)
    PRIOS[queue .. '\n' .. priority] = nil
  end
end

local function pending_remove(queue, priority, id)
  pending_remove_many(queue, priority, {id})
end

-- Calls fn(level_key, priority) for each priority of the queue, highest first, until
-- fn returns true.
local function each_level(queue, fn)
  for _, priority in ipairs(redis.call('ZRANGE', K.prios(queue), 0, -1)) do
    if fn(K.level(queue, priority), priority) then
      return
    end
  end
end

-- The earliest run_at among the pending jobs of a queue, or nil.
local function first_run_at(queue)
  local first = nil
  each_level(queue, function(level)
    local head = redis.call('ZRANGE', level, 0, 0, 'WITHSCORES')
    local t = tonumber(head[2])
    if t ~= nil and (first == nil or t < first) then
      first = t
    end
    return false
  end)
  return first
end

-- -- jobs --------------------------------------------------------------------------

local function load(id)
  local v = redis.call('HMGET', K.job(id), 'queue', 'state', 'priority', 'key',
    'lease_token', 'lease_seconds', 'attempts', 'max_attempts', 'run_at', 'has_followup',
    'worker_id')
  if not v[1] then
    return nil
  end
  return {
    id = id, queue = v[1], state = v[2], priority = v[3], key = v[4] or nil,
    token = v[5] or nil, lease_seconds = tonumber(v[6]), attempts = tonumber(v[7]),
    max_attempts = tonumber(v[8]), run_at = tonumber(v[9]), has_followup = v[10] and true,
    worker = v[11] or nil,
  }
end

-- The job if `token` is the lease of its current claim, else nil (a stale lease).
local function leased(id, token)
  local job = load(id)
  if job ~= nil and job.state == 'running' and job.token == token then
    return job
  end
  return nil
end

-- {id, {field, value, ...}}: how a whole job goes back to Python (in a JSON list).
local function job_reply(id)
  return {id, redis.call('HGETALL', K.job(id))}
end

-- -- requests: what a schedule asks for (crawlq.stores.conflict.Request) -------------

local function request_from_hash(key)
  local v = redis.call('HMGET', key, 'task', 'args', 'kwargs', 'sig', 'priority', 'run_at',
    'max_attempts', 'lease_seconds', 'timeout')
  return {
    task = v[1], args = v[2], kwargs = v[3], sig = v[4] or nil, priority = v[5],
    run_at = tonumber(v[6]), max_attempts = v[7], lease_seconds = tonumber(v[8]),
    timeout = v[9] and tonumber(v[9]) or nil,
  }
end

local function request_fields(req, out)
  local f = out or {}
  local function put(name, value)
    f[#f + 1] = name
    f[#f + 1] = value
  end
  put('task', req.task)
  put('args', req.args)
  put('kwargs', req.kwargs)
  put('priority', req.priority)
  put('run_at', fmt(req.run_at))
  put('max_attempts', req.max_attempts)
  put('lease_seconds', fmt(req.lease_seconds))
  if req.sig then
    put('sig', req.sig)
  end
  if req.timeout then
    put('timeout', fmt(req.timeout))
  end
  return f
end

local function write_request(key, req)
  redis.call('HSET', key, unpack(request_fields(req)))
  if not req.timeout then
    redis.call('HDEL', key, 'timeout')
  end
end

-- Python's Request equality, `a` being the merged request and `b` the stored one: `sig`
-- stands for the arguments as stored, `cmp` (only on an incoming request, when it
-- differs) for the arguments as the request gave them.
local function same_request(a, b)
  return a.task == b.task and (a.cmp or a.sig) == b.sig
    and tonumber(a.priority) == tonumber(b.priority) and a.run_at == b.run_at
    and tonumber(a.max_attempts) == tonumber(b.max_attempts)
    and a.lease_seconds == b.lease_seconds and a.timeout == b.timeout
end

-- crawlq.stores.conflict.merge: what the live request becomes; nil when unchanged.
local function merge(existing, incoming, policy)
  if policy == 'keep' then
    return nil
  end
  local merged = incoming
  if policy == 'earliest' then
    merged = {}
    for k, v in pairs(existing) do
      merged[k] = v
    end
    if incoming.run_at < existing.run_at then
      merged.run_at = incoming.run_at
    end
    if tonumber(incoming.priority) > tonumber(existing.priority) then
      merged.priority = incoming.priority
    end
  end
  if same_request(merged, existing) then
    return nil
  end
  return merged
end

-- A spec as the store encodes it (store.py _spec_row): a JSON array of queue, task,
-- args, kwargs, key, sig, priority, run_at, delay, max_attempts, lease_seconds,
-- timeout, on_conflict, cmp; null for None.
local function spec_from(s, now)
  local run_at = null(s[8])
  local req = {
    task = s[2], args = s[3], kwargs = s[4], sig = null(s[6]), priority = fmt_int(s[7]),
    run_at = run_at or (now + s[9]), max_attempts = fmt_int(s[10]),
    lease_seconds = s[11], timeout = null(s[12]), cmp = null(s[14]),
  }
  return {queue = s[1], key = null(s[5]), policy = s[13], request = req}
end

local function specs_from(list, now)
  local specs = {}
  for n, s in ipairs(list) do
    specs[n] = spec_from(s, now)
  end
  return specs
end

-- -- scheduling ----------------------------------------------------------------------

-- A new pending job. The caller made sure the key (if any) is free.
local QUEUES = {}  -- queues already added to {p}:queues by this script

local function insert(queue, key, req, now)
  local id = fmt_int(redis.call('INCR', K.ids()))
  local fields = {'queue', queue, 'state', 'pending', 'attempts', '0', 'created_at', fmt(now)}
  if key then
    fields[#fields + 1] = 'key'
    fields[#fields + 1] = key
  end
  redis.call('HSET', K.job(id), unpack(request_fields(req, fields)))
  redis.call('ZADD', K.jobs(), id, id)
  if not QUEUES[queue] then
    redis.call('SADD', K.queues(), queue)
    QUEUES[queue] = true
  end
  count(queue, 'pending', 1)
  pending_add(queue, req.priority, req.run_at, id)
  if key then
    redis.call('HSET', K.keys(queue), key, id)
  end
  return id
end

-- Remember a request for a running key: one per key, merged by the policy.
local function defer(id, incoming, policy)
  local key = K.followup(id)
  local merged = incoming
  if redis.call('EXISTS', key) == 1 then
    merged = merge(request_from_hash(key), incoming, policy)
  end
  if merged == nil then
    return id, 'unchanged'
  end
  redis.call('DEL', key)
  redis.call('HSET', key, unpack(request_fields(merged)))
  redis.call('HSET', K.job(id), 'has_followup', '1')
  return id, 'deferred'
end

-- One schedule request: returns the job id and the outcome.
local function schedule(spec, now)
  local queue, key, incoming = spec.queue, spec.key, spec.request
  local live = key and redis.call('HGET', K.keys(queue), key)
  if not live then
    return insert(queue, key, incoming, now), 'created'
  end
  if redis.call('HGET', K.job(live), 'state') == 'running' then
    return defer(live, incoming, spec.policy)
  end
  local existing = request_from_hash(K.job(live))
  local merged = merge(existing, incoming, spec.policy)
  if merged == nil then
    return live, 'unchanged'
  end
  pending_remove(queue, existing.priority, live)
  write_request(K.job(live), merged)
  pending_add(queue, merged.priority, merged.run_at, live)
  return live, 'updated'
end

-- -- leaving the running or pending state ----------------------------------------------

-- Every way out of running passes here: the job leaves {p}:running and the set of
-- running jobs of the worker that holds it.
local function leave(job)
  if job.state == 'running' then
    redis.call('ZREM', K.running(), job.id)
    if job.worker then
      redis.call('SREM', K.worker_jobs(job.worker), job.id)
    end
  else
    pending_remove(job.queue, job.priority, job.id)
  end
end

-- Back to pending (retry, release, expired lease) at run_at; `fields` are extra pairs.
local function back_to_pending(job, run_at, fields)
  leave(job)
  local f = {'state', 'pending', 'run_at', fmt(run_at)}
  for _, v in ipairs(fields) do
    f[#f + 1] = v
  end
  redis.call('HSET', K.job(job.id), unpack(f))
  redis.call('HDEL', K.job(job.id), 'lease_token', 'lease_expires_at', 'dead_reason',
    'finished_at')
  move_count(job.queue, job.state, 'pending')
  pending_add(job.queue, job.priority, run_at, job.id)
end

-- End a live job as done, dead or cancelled: frees its key, and (unless cancelled)
-- turns its remembered request into a new pending job.
local function finish(job, state, now, fields)
  leave(job)
  local f = {'state', state, 'finished_at', fmt(now)}
  for _, v in ipairs(fields) do
    f[#f + 1] = v
  end
  redis.call('HSET', K.job(job.id), unpack(f))
  redis.call('HDEL', K.job(job.id), 'lease_token', 'lease_expires_at', 'has_followup')
  move_count(job.queue, job.state, state)
  redis.call('ZADD', K.finished(job.queue, state), fmt(now), job.id)
  if job.key and redis.call('HGET', K.keys(job.queue), job.key) == job.id then
    redis.call('HDEL', K.keys(job.queue), job.key)
  end
  if job.has_followup then
    local followup = K.followup(job.id)
    if state ~= 'cancelled' then
      insert(job.queue, job.key, request_from_hash(followup), now)
    end
    redis.call('DEL', followup)
  end
end

-- A running job taken back from its worker (lease expired, worker declared dead):
-- pending again at its run_at if it has attempts left, else dead with `reason`.
local function take_back(job, now, message, reason)
  if job.attempts < job.max_attempts then
    back_to_pending(job, job.run_at, {'last_error', message})
  else
    finish(job, 'dead', now, {'last_error', message, 'dead_reason', reason})
  end
end

-- -- filters: listing, requeueing and purging (crawlq.stores.base.JobFilter) ----------

-- 8 arguments from ARGV[i]: after_id, ids? (comma list), queue?, task?, states?
-- (comma list), finished_before?, limit (-1: none), budget (ids to look at).
local function read_filter(i)
  local f = {
    after = tonumber(ARGV[i]), queue = opt(ARGV[i + 2]), task = opt(ARGV[i + 3]),
    finished_before = opt_number(ARGV[i + 5]), limit = tonumber(ARGV[i + 6]),
    budget = tonumber(ARGV[i + 7]),
  }
  local ids = opt(ARGV[i + 1])
  if ids then
    f.ids = split(ids)
  end
  local states = opt(ARGV[i + 4])
  if states then
    f.states = {}
    for _, s in ipairs(split(states)) do
      f.states[s] = true
    end
  end
  return f
end

local function matches(f, id)
  local v = redis.call('HMGET', K.job(id), 'queue', 'task', 'state', 'finished_at')
  if not v[1] then
    return false
  end
  if (f.queue and v[1] ~= f.queue) or (f.task and v[2] ~= f.task) then
    return false
  end
  if f.states and not f.states[v[3]] then
    return false
  end
  if f.finished_before and not (v[4] and tonumber(v[4]) < f.finished_before) then
    return false
  end
  return true
end

-- Calls visit(id) for the jobs matching f, in id order after f.after: at most f.limit
-- of them, looking at most at f.budget ids (f.ids, when given, are looked at in full).
-- Returns the last id looked at, 1 when there is nothing more to look at (else 0), and
-- how many jobs matched.
local function scan(f, visit)
  local ids = f.ids
  if ids == nil then
    ids = redis.call('ZRANGEBYSCORE', K.jobs(), '(' .. fmt_int(f.after), '+inf',
      'LIMIT', 0, f.budget)
  end
  local cursor, matched = f.after, 0
  for _, id in ipairs(ids) do
    if f.limit >= 0 and matched >= f.limit then
      return cursor, 1, matched
    end
    cursor = tonumber(id)
    if matches(f, id) then
      matched = matched + 1
      visit(id)
    end
  end
  local done = f.ids ~= nil or #ids < f.budget or (f.limit >= 0 and matched >= f.limit)
  return cursor, done and 1 or 0, matched
end
