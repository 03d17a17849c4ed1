-- prelude.lua: the helpers every script shares (Redis scripts cannot call each other).
--
-- crawlq/stores/redis/lua.py puts, in this order: `local ARGV, PREFIX`, the key builders
-- K.* generated from crawlq/stores/redis/keys.py, this file; then every script, each as
-- one function of a library (Redis 7+: these helpers are defined once, when the library
-- loads) or each after its own copy of all this (EVALSHA). Either way a call starts with
-- begin(ARGV) (the end of this file), which gives the helpers the call's arguments and
-- fresh per-call tables: nothing a call writes here outlives it.
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

-- Ids (decimal text) in numeric order: table.sort(ids, by_id).
local function by_id(a, b)
  return tonumber(a) < tonumber(b)
end

local function ids_from(first)
  -- ARGV[first..] as job ids, each once, in id order
  local ids, seen = {}, {}
  for i = first, #ARGV do
    if not seen[ARGV[i]] then
      seen[ARGV[i]] = true
      ids[#ids + 1] = ARGV[i]
    end
  end
  table.sort(ids, by_id)
  return ids
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

-- Add delta to deltas[owner][field], written out once at commit.
local function add_delta(deltas, owner, field, delta)
  local per_owner = deltas[owner]
  if per_owner == nil then
    per_owner = {}
    deltas[owner] = per_owner
  end
  per_owner[field] = (per_owner[field] or 0) + delta
end

local function count(queue, state, delta)
  add_delta(COUNTS, queue, state, delta)
end

local function move_count(queue, from, to)
  count(queue, from, -1)
  count(queue, to, 1)
end

-- -- the pending index: per queue, priorities, then one zset per priority by run_at ---

-- The claim order: priority highest first, then run_at, then id. The index keeps it
-- (priorities by -priority, each zset by run_at, members of equal run_at by id; a key's
-- waiting jobs likewise, waiting_member); claim_before merges what a claim read from
-- several queues and priorities. Siblings: the fragment claim_order of each SQL store's
-- queries.sql, crawlq.stores.states.claim_order.
local function claim_before(a, b)
  if a.p ~= b.p then
    return a.p > b.p
  end
  if a.run_at ~= b.run_at then
    return a.run_at < b.run_at
  end
  return tonumber(a.id) < tonumber(b.id)
end

-- "a7", "b42", ... "p" .. 16 digits: members of equal score sort by id.
local function member(id)
  return string.char(96 + #id) .. id
end

local function member_id(m)
  return string.sub(m, 2)
end

local PRIOS = {}  -- queue .. '\n' .. priority -> true once in {p}:q:{queue}:prios

-- A priority's zset is made a skiplist, whatever its size. Below
-- zset-max-listpack-entries members (128 by default) Redis would make it a listpack, whose
-- every insert reads the members' scores back from text: when every job of a queue has a
-- limit key the zset holds one front per key, often fewer than 128, and those inserts
-- cost a limit-key drain about 10 us a job (docs/stores.md, "What the keys hold"). A zset
-- given a member longer than zset-max-listpack-value (64 by default) becomes a skiplist
-- and stays one when the member goes: SKIPLIST goes in with the first job of a new zset
-- and out at once, in the same call, so nothing else ever sees it. A zset is new when its
-- priority is new to the queue's priorities, which hold exactly the priorities that have
-- a zset. A zset made otherwise (by an older crawlq, or loaded again by a restarted
-- server) stays as Redis made it until it empties.
local SKIPLIST = 'crawlq: a member longer than zset-max-listpack-value, added and removed at once'

local function pending_add(queue, priority, run_at, id)
  local level = K.level(queue, priority)
  local known = queue .. '\n' .. priority
  local new = false
  if not PRIOS[known] then
    PRIOS[known] = true
    new = redis.call('ZADD', K.prios(queue), fmt(-tonumber(priority)), priority) == 1
  end
  if new then
    redis.call('ZADD', level, fmt(run_at), member(id), 'inf', SKIPLIST)
    redis.call('ZREM', level, SKIPLIST)
  else
    redis.call('ZADD', level, fmt(run_at), member(id))
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

-- The opening of the scripts that update a worker (ARGV: prefix, now, worker id): its
-- hash if the worker is alive (else nil), now and its id.
local function alive_worker()
  local key, now, id = K.worker(ARGV[3]), clock(ARGV[2]), ARGV[3]
  if redis.call('HGET', key, 'state') ~= 'alive' then
    return nil
  end
  return key, now, id
end

-- -- jobs --------------------------------------------------------------------------

local function load(id)
  local v = redis.call('HMGET', K.job(id), 'queue', 'state', 'priority', 'key',
    'lease_token', 'lease_seconds', 'attempts', 'max_attempts', 'run_at', 'has_followup',
    'worker_id', 'crawl_id', 'limit_key', 'sub', 'own_run_at')
  if not v[1] then
    return nil
  end
  return {
    id = id, queue = v[1], state = v[2], priority = v[3], key = v[4] or nil,
    token = v[5] or nil, lease_seconds = tonumber(v[6]), attempts = tonumber(v[7]),
    max_attempts = tonumber(v[8]), run_at = tonumber(v[9]), has_followup = v[10] and true,
    worker = v[11] or nil, crawl = v[12] or nil, lkey = v[13] or nil, sub = v[14] or nil,
    own_run_at = v[15] or nil,
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

-- -- crawls: states and counters ------------------------------------------------------

local CRAWL_STATE = {}  -- crawl id -> state, as read or set by this script
local CRAWL_DELTA = {}  -- crawl id -> {counter -> change}, written by commit()
local CRAWL_TOUCHED = {}  -- crawl ids whose pending + running went down, in order
local TOUCHED_SEEN = {}

-- The crawl's state, or nil if there is no such crawl.
local function crawl_state(crawl)
  local state = CRAWL_STATE[crawl]
  if state == nil then
    state = redis.call('HGET', K.crawl(crawl), 'state') or false
    CRAWL_STATE[crawl] = state
  end
  return state or nil
end

local function crawl_open(crawl)
  local state = crawl_state(crawl)
  return state == 'running' or state == 'paused'
end

local function set_crawl_state(crawl, state, fields)
  redis.call('HSET', K.crawl(crawl), 'state', state, unpack(fields or {}))
  CRAWL_STATE[crawl] = state
end

-- crawl_transition: the crawl ARGV[3] moves from one of the states `from` (a set) to
-- `to`, with the extra hash `fields`; returns it, or nil (and nothing changed) if it was
-- in another state. Siblings: the _crawl_transition of each store (store.py).
local function crawl_transition(from, to, fields)
  local crawl = ARGV[3]
  if not from[crawl_state(crawl)] then
    return nil
  end
  set_crawl_state(crawl, to, fields)
  return crawl
end

-- Ids this call made pending, per crawl: commit adds them to {p}:cpend:{crawl} in one
-- SADD (cpend_flush); what reads the set here flushes first.
local CPEND = {}  -- crawl -> {id -> true}

local function cpend_flush()
  for crawl, added in pairs(CPEND) do
    local ids = {}
    for id in pairs(added) do
      ids[#ids + 1] = id
    end
    call_many('SADD', K.crawl_pending(crawl), ids)
  end
  CPEND = {}
end

-- The pending jobs of a crawl, in id order.
local function crawl_pending_ids(crawl)
  cpend_flush()
  local ids = redis.call('SMEMBERS', K.crawl_pending(crawl))
  table.sort(ids, by_id)
  return ids
end

local function crawl_count(crawl, counter, delta)
  add_delta(CRAWL_DELTA, crawl, counter, delta)
end

local FINAL = {done = true, dead = true, cancelled = true}

-- A job moves from one public state to another: its queue's and its crawl's counts.
local function move(job, from, to)
  count(job.queue, from, -1)
  count(job.queue, to, 1)
  local crawl = job.crawl
  if crawl then
    crawl_count(crawl, from, -1)
    crawl_count(crawl, to, 1)
    if FINAL[to] and not TOUCHED_SEEN[crawl] then
      TOUCHED_SEEN[crawl] = true
      CRAWL_TOUCHED[#CRAWL_TOUCHED + 1] = crawl
    end
  end
end

-- -- limits: key records, waiting zsets, fronts (crawlq.limits) --------------------------

-- A limit key's record ({p}:limit:{lkey}) as this call sees it: read whole once (HMGET),
-- changed here, written once by commit (limit_flush): a batch of jobs of one key costs
-- one read and one write of its record, not several commands per job. Every script
-- that changes a record through these ends with commit; scripts that write a record
-- themselves (limit_set, limit_block) do so before its first use here.
local LIMIT_FIELDS = {'source', 'max_running', 'min_interval', 'blocked_until', 'running',
  'pending', 'last_start', 'front'}
local LIMITS = {}  -- lkey -> {values = {field -> text}, dirty = {field -> true}}

local function limit_record(lkey)
  local rec = LIMITS[lkey]
  if rec == nil then
    local v = redis.call('HMGET', K.limit(lkey), unpack(LIMIT_FIELDS))
    rec = {values = {}, dirty = {}}
    for i, field in ipairs(LIMIT_FIELDS) do
      rec.values[field] = v[i] or nil
    end
    LIMITS[lkey] = rec
  end
  return rec.values
end

-- Set (nil: delete) a field of the key's record.
local function limit_put(lkey, field, value)
  limit_record(lkey)
  local rec = LIMITS[lkey]
  rec.values[field] = value
  rec.dirty[field] = true
end

local function limit_add(lkey, field, delta)
  limit_put(lkey, field, fmt_int((tonumber(limit_record(lkey)[field]) or 0) + delta))
end

local function limit_flush()
  for lkey, rec in pairs(LIMITS) do
    local set, gone = {}, {}
    for field in pairs(rec.dirty) do
      local value = rec.values[field]
      if value == nil then
        gone[#gone + 1] = field
      else
        set[#set + 1] = field
        set[#set + 1] = value
      end
    end
    if #set > 0 then
      redis.call('HSET', K.limit(lkey), unpack(set))
    end
    if #gone > 0 then
      redis.call('HDEL', K.limit(lkey), unpack(gone))
    end
  end
  LIMITS = {}
end

-- Lexicographic order of the hex digits = numeric order of the float (IEEE 754 bits,
-- sign bit flipped for positives, all bits flipped for negatives).
local function time_code(t)
  local b = {string.byte(struct.pack('>d', t), 1, 8)}
  if b[1] >= 128 then
    for i = 1, 8 do
      b[i] = 255 - b[i]
    end
  else
    b[1] = b[1] + 128
  end
  return string.format('%02x%02x%02x%02x%02x%02x%02x%02x', unpack(b))
end

local function waiting_member(run_at, id)
  return time_code(run_at) .. member(id)
end

local function waiting_member_id(m)
  return string.sub(m, 18)
end

-- A pending job of a paused crawl is held (out of the index and its key's waiting jobs).
-- `written`: the job's hash has its sub already (a new job, see insert).
local function to_held(job, written)
  if not written then
    redis.call('HSET', K.job(job.id), 'sub', 'held')
  end
  count(job.queue, 'held', 1)
end

-- A pending keyed job waits behind its key's front.
local function to_waiting(job, written)
  if not written then
    redis.call('HSET', K.job(job.id), 'sub', 'waiting')
  end
  redis.call('ZADD', K.limit_waiting(job.lkey), fmt(-tonumber(job.priority)),
    waiting_member(job.run_at, job.id))
  count(job.queue, 'waiting', 1)
end

-- If the key has no front and room to start a job, its best waiting job (priority desc,
-- run_at, id) becomes the front: in the claim index at its gated run_at. Siblings:
-- crawlq_reconcile (postgres/migrations/0008_rules.sql), SQLiteStore._reconcile.
local function reconcile(lkey)
  local r = limit_record(lkey)
  if r.front then
    return
  end
  local cap = tonumber(r.max_running)
  if cap and (tonumber(r.running) or 0) >= cap then
    return
  end
  local best = redis.call('ZPOPMIN', K.limit_waiting(lkey))[1]
  if best == nil then
    return
  end
  local id = waiting_member_id(best)
  local v = redis.call('HMGET', K.job(id), 'queue', 'priority', 'run_at')
  local run_at = tonumber(v[3])
  local gate = run_at
  if r.last_start then
    gate = math.max(gate, tonumber(r.last_start) + (tonumber(r.min_interval) or 0))
  end
  if r.blocked_until then
    gate = math.max(gate, tonumber(r.blocked_until))
  end
  if gate > run_at then
    redis.call('HSET', K.job(id), 'run_at', fmt(gate), 'own_run_at', v[3])
  end
  redis.call('HDEL', K.job(id), 'sub')
  count(v[1], 'waiting', -1)
  limit_put(lkey, 'front', id)
  pending_add(v[1], v[2], gate, id)
end

-- The settings of a key that has none yet (no record, or one made by limit_block): the
-- crawl's limits, else the queue default, else none. Then one more pending job.
local function key_enter(lkey, crawl, queue)
  local source = limit_record(lkey).source
  if not source or source == 'none' then
    local limits = crawl and redis.call('HGET', K.crawl(crawl), 'limits')
    if not limits then
      limits = redis.call('HGET', K.limit_defaults(), queue)
    end
    local cap, interval = nil, 0
    if limits then
      local l = cjson.decode(limits)
      cap, interval = null(l.max_running), l.min_interval
    end
    limit_put(lkey, 'source', 'default')
    limit_put(lkey, 'min_interval', fmt(interval))
    limit_put(lkey, 'max_running', cap and fmt_int(cap) or nil)
    if not source then
      redis.call('ZADD', K.limit_keys(), 0, lkey)
    end
  end
  limit_add(lkey, 'pending', 1)
end

-- -- pending jobs: where they wait ---------------------------------------------------

-- The pending-state rule: a pending job (its hash written, run_at its own) takes its
-- place: held in a paused crawl, waiting behind its limit key (then the key is
-- reconciled), else the index (where due and not yet due are one: no ready/scheduled
-- split). Siblings: crawlq_pending_state (postgres/migrations/0008_rules.sql) and
-- crawlq.stores.states.pending_state (the SQLite store). insert and back_to_pending
-- skip it for a job with neither crawl nor limit key: it goes to the index.
-- placement(job) is the job's sub by the rule: 'held', 'waiting' or nil (the index).
local function placement(job)
  if job.crawl and crawl_state(job.crawl) == 'paused' then
    return 'held'
  elseif job.lkey then
    return 'waiting'
  end
  return nil
end

-- `written`: the job's hash has its sub already (a new job, see insert).
local function place(job, written)
  local sub = placement(job)
  if sub == 'held' then
    to_held(job, written)
  elseif sub == 'waiting' then
    to_waiting(job, written)
    reconcile(job.lkey)
  else
    pending_add(job.queue, job.priority, job.run_at, job.id)
  end
end

-- Take a pending job out of its place. A front stops being front (without reconciling
-- its key) and gets its own run_at back. Returns true if it was a front.
local function unplace(job)
  local key = K.job(job.id)
  if job.sub == 'held' then
    redis.call('HDEL', key, 'sub')
    count(job.queue, 'held', -1)
  elseif job.sub == 'waiting' then
    redis.call('ZREM', K.limit_waiting(job.lkey), waiting_member(job.run_at, job.id))
    redis.call('HDEL', key, 'sub')
    count(job.queue, 'waiting', -1)
  else
    pending_remove(job.queue, job.priority, job.id)
    if job.lkey then
      limit_put(job.lkey, 'front', nil)
      if job.own_run_at then
        redis.call('HSET', key, 'run_at', job.own_run_at)
        redis.call('HDEL', key, 'own_run_at')
        job.run_at = tonumber(job.own_run_at)
        job.own_run_at = nil
      end
      return true
    end
  end
  job.sub = nil
  return false
end

-- A job becomes pending (new, retried, requeued): its crawl's and key's pending sets.
local function enter_pending(job)
  if job.crawl then
    CPEND[job.crawl] = CPEND[job.crawl] or {}
    CPEND[job.crawl][job.id] = true
  end
  if job.lkey then
    key_enter(job.lkey, job.crawl, job.queue)
  end
end

local function exit_pending(job)
  local added = job.crawl and CPEND[job.crawl]
  if added and added[job.id] then
    added[job.id] = nil
  elseif job.crawl then
    redis.call('SREM', K.crawl_pending(job.crawl), job.id)
  end
  if job.lkey then
    limit_add(job.lkey, 'pending', -1)
  end
end

-- A key's front is timed again (settings or block changed): back to waiting, then the
-- key is reconciled (the same job again, unless the key is now at its cap).
local function retime(lkey)
  local front = limit_record(lkey).front
  if front then
    local job = load(front)
    unplace(job)
    to_waiting(job)
  end
  reconcile(lkey)
end

-- -- requests: what a schedule asks for (crawlq.stores.conflict.Request) -------------

local function request_from_hash(key)
  local v = redis.call('HMGET', key, 'task', 'args', 'kwargs', 'sig', 'priority', 'run_at',
    'max_attempts', 'lease_seconds', 'timeout', 'crawl_id', 'limit_key')
  return {
    task = v[1], args = v[2], kwargs = v[3], sig = v[4] or nil, priority = v[5],
    run_at = tonumber(v[6]), max_attempts = v[7], lease_seconds = tonumber(v[8]),
    timeout = v[9] and tonumber(v[9]) or nil, crawl = v[10] or nil, lkey = v[11] or nil,
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
  if req.crawl then
    put('crawl_id', req.crawl)
  end
  if req.lkey then
    put('limit_key', req.lkey)
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
-- differs) for the arguments as the request gave them. Crawl and limit key always come
-- from the stored request.
local function same_request(a, b)
  return a.task == b.task and (a.cmp or a.sig) == b.sig
    and tonumber(a.priority) == tonumber(b.priority) and a.run_at == b.run_at
    and tonumber(a.max_attempts) == tonumber(b.max_attempts)
    and a.lease_seconds == b.lease_seconds and a.timeout == b.timeout
end

-- crawlq.stores.conflict.merge: what the live request becomes; nil when unchanged. It
-- keeps the stored request's crawl and limit key whatever the policy.
local function merge(existing, incoming, policy)
  if policy == 'keep' then
    return nil
  end
  local merged = {}
  local base = policy == 'earliest' and existing or incoming
  for k, v in pairs(base) do
    merged[k] = v
  end
  merged.crawl, merged.lkey = existing.crawl, existing.lkey
  if policy == 'earliest' then
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

local function from_hex(s)
  return (string.gsub(s, '..', function(h) return string.char(tonumber(h, 16)) end))
end

-- Keep record under key (raw bytes) in a crawl's results, numbered next, unless the key
-- has one already (its first record stays): 1 if kept, else 0. result_add.lua and
-- keep_records.
local function keep_result(crawl, key, record)
  local keys = K.result_keys(crawl)
  local seq = fmt_int(redis.call('HLEN', keys) + 1)  -- seqs are 1 ... HLEN: none is deleted
  local added = redis.call('HSETNX', keys, key, seq)
  if added == 1 then
    redis.call('HSET', K.results(crawl), seq, record)
  end
  return added
end

-- Keep the records a job's end carries (Completion/Failure.records): each {crawl id, key
-- (hex), record} (codec.records_json); a record of an unknown crawl is dropped.
local function keep_records(list)
  for _, r in ipairs(list) do
    local crawl = fmt_int(r[1])
    if crawl_state(crawl) ~= nil then
      keep_result(crawl, from_hex(r[2]), r[3])
    end
  end
end

-- A spec as the store encodes it (store.py _spec_row): a JSON array of queue, task,
-- args, kwargs, key, sig, priority, run_at, delay, max_attempts, lease_seconds,
-- timeout, on_conflict, cmp, crawl, limit_key, fingerprint (hex); null for None.
local function spec_from(s, now)
  local run_at = null(s[8])
  local crawl = null(s[15])
  local fp = null(s[17])
  local req = {
    task = s[2], args = s[3], kwargs = s[4], sig = null(s[6]), priority = fmt_int(s[7]),
    run_at = run_at or (now + s[9]), max_attempts = fmt_int(s[10]),
    lease_seconds = s[11], timeout = null(s[12]), cmp = null(s[14]),
    crawl = crawl and fmt_int(crawl), lkey = null(s[16]),
  }
  return {queue = s[1], key = null(s[5]), policy = s[13], request = req,
    fp = fp and from_hex(fp)}
end

local function specs_from(list, now)
  local specs = {}
  for n, s in ipairs(list) do
    specs[n] = spec_from(s, now)
  end
  return specs
end

-- The first spec whose crawl takes no jobs: {'crawl_not_found' or 'crawl_closed',
-- crawl, state}; nil when every crawl is open. Checked before a script's first write.
local function closed_crawl(specs)
  for _, spec in ipairs(specs) do
    local crawl = spec.request.crawl
    if crawl and not crawl_open(crawl) then
      local state = crawl_state(crawl)
      if state == nil then
        return {'crawl_not_found', crawl, ''}
      end
      return {'crawl_closed', crawl, state}
    end
  end
  return nil
end

-- -- scheduling ----------------------------------------------------------------------

local QUEUES = {}  -- queues already added to {p}:queues by this script

-- A new job (its hash written): in {p}:jobs, its queue in {p}:queues, counted pending
-- and enqueued. insert and job_schedule_plain.lua.
local function listed(queue, id)
  redis.call('ZADD', K.jobs(), id, id)
  if not QUEUES[queue] then
    redis.call('SADD', K.queues(), queue)
    QUEUES[queue] = true
  end
  count(queue, 'pending', 1)
  count(queue, 'total_enqueued', 1)
end

-- A new pending job. The caller made sure the key (if any) is free and the crawl open.
local function insert(queue, key, req, now)
  local id = fmt_int(redis.call('INCR', K.ids()))
  local fields = {'queue', queue, 'state', 'pending', 'attempts', '0', 'created_at', fmt(now)}
  if key then
    fields[#fields + 1] = 'key'
    fields[#fields + 1] = key
  end
  local job = nil
  if req.crawl or req.lkey then
    job = {id = id, queue = queue, priority = req.priority, run_at = req.run_at,
      crawl = req.crawl, lkey = req.lkey}
    local sub = placement(job)  -- written with the rest of the hash
    if sub then
      fields[#fields + 1] = 'sub'
      fields[#fields + 1] = sub
    end
  end
  redis.call('HSET', K.job(id), unpack(request_fields(req, fields)))
  listed(queue, id)
  if key then
    redis.call('HSET', K.keys(queue), key, id)
  end
  if job then
    if req.crawl then
      crawl_count(req.crawl, 'pending', 1)
    end
    enter_pending(job)
    place(job, true)
  else
    pending_add(queue, req.priority, req.run_at, id)
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

-- A pending job takes a new request (merged, or rescheduled) and its place again: held
-- in a paused crawl, behind its limit key, else the index by its new run_at.
local function update_pending(job, req)
  local front = unplace(job)
  write_request(K.job(job.id), req)
  job.priority, job.run_at = req.priority, req.run_at
  place(job)
  if front then
    reconcile(job.lkey)
  end
end

-- One schedule request: returns the job id and the outcome; nil when its crawl is
-- closed (a child or follow-up is then dropped). A fingerprint already in the crawl's
-- seen set writes nothing: 0, 'seen'.
local function schedule(spec, now)
  local queue, key, incoming = spec.queue, spec.key, spec.request
  if incoming.crawl then
    if not crawl_open(incoming.crawl) then
      return nil, nil
    end
    if spec.fp then
      if redis.call('SADD', K.seen(incoming.crawl), spec.fp) == 0 then
        return 0, 'seen'
      end
      crawl_count(incoming.crawl, 'seen', 1)
    end
  end
  local live = key and redis.call('HGET', K.keys(queue), key)
  if not live then
    return insert(queue, key, incoming, now), 'created'
  end
  if redis.call('HGET', K.job(live), 'state') == 'running' then
    return defer(live, incoming, spec.policy)
  end
  local job = load(live)
  local existing = request_from_hash(K.job(live))
  if job.own_run_at then
    existing.run_at = tonumber(job.own_run_at)  -- a front compares by its own run_at
  end
  local merged = merge(existing, incoming, spec.policy)
  if merged == nil then
    return live, 'unchanged'
  end
  update_pending(job, merged)
  return live, 'updated'
end

-- -- leaving the running or pending state ----------------------------------------------

-- Every way out of running or pending passes here: a running job leaves {p}:running,
-- its worker's set and its key's running count; a pending one leaves its place and the
-- pending sets of its crawl and key. The caller reconciles the key afterwards.
local function leave(job)
  if job.state == 'running' then
    redis.call('ZREM', K.running(), job.id)
    if job.worker then
      redis.call('SREM', K.worker_jobs(job.worker), job.id)
    end
    if job.lkey then
      limit_add(job.lkey, 'running', -1)
    end
  else
    unplace(job)
    exit_pending(job)
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
  move(job, job.state, 'pending')
  job.run_at = run_at
  if job.crawl or job.lkey then
    enter_pending(job)
    place(job)
    if job.lkey then
      reconcile(job.lkey)
    end
  else
    pending_add(job.queue, job.priority, run_at, job.id)
  end
end

-- A failed attempt with attempts left: back to pending, counted as retried (a release
-- gives its attempt back and is not).
local function retry(job, run_at, message)
  back_to_pending(job, run_at, {'last_error', message})
  count(job.queue, 'total_retried', 1)
end

-- spawn_followups: a job that ended (unless cancelled) turns its remembered request
-- into a new pending job, unless that request's crawl is closed by now. Siblings: the
-- update trigger crawlq_jobs_updated (postgres/migrations/0008_rules.sql) and
-- SQLiteStore._spawn_followups.
local function spawn_followups(job, state, now)
  local followup = K.followup(job.id)
  if state ~= 'cancelled' then
    local req = request_from_hash(followup)
    if not req.crawl or crawl_open(req.crawl) then
      insert(job.queue, job.key, req, now)
    end
  end
  redis.call('DEL', followup)
end

-- End a live job as done, dead or cancelled: frees its key, and spawns its remembered
-- request (spawn_followups).
local function finish(job, state, now, fields)
  leave(job)
  local f = {'state', state, 'finished_at', fmt(now)}
  for _, v in ipairs(fields) do
    f[#f + 1] = v
  end
  redis.call('HSET', K.job(job.id), unpack(f))
  redis.call('HDEL', K.job(job.id), 'lease_token', 'lease_expires_at', 'has_followup')
  move(job, job.state, state)
  if state ~= 'cancelled' then
    count(job.queue, state == 'done' and 'total_completed' or 'total_dead_lettered', 1)
  end
  redis.call('ZADD', K.finished(job.queue, state), fmt(now), job.id)
  if job.key and redis.call('HGET', K.keys(job.queue), job.key) == job.id then
    redis.call('HDEL', K.keys(job.queue), job.key)
  end
  if job.has_followup then
    spawn_followups(job, state, now)
  end
  if job.lkey then
    reconcile(job.lkey)
  end
  if redis.call('EXISTS', K.finish_wait(job.id)) == 1 then
    redis.call('PUBLISH', K.finish_channel(job.id), state)  -- crawlq.stores.finished
  end
end

-- Cancel the pending jobs of a crawl (its {p}:cpend set, held ones too) and the jobs of
-- `more` ids that are still live, in id order; the set is emptied. Returns how many.
local function cancel_crawl_jobs(crawl, now, more)
  cpend_flush()
  local ids = redis.call('SMEMBERS', K.crawl_pending(crawl))
  for _, id in ipairs(more or {}) do
    ids[#ids + 1] = id
  end
  table.sort(ids, by_id)
  local cancelled = 0
  for _, id in ipairs(ids) do
    local job = load(id)
    if job and (job.state == 'pending' or job.state == 'running') then
      finish(job, 'cancelled', now, {})
      cancelled = cancelled + 1
    end
  end
  redis.call('DEL', K.crawl_pending(crawl))
  return cancelled
end

-- A running job taken back from its worker (lease expired, worker declared dead):
-- pending again at its run_at if it has attempts left, else dead with `reason`.
local function take_back(job, now, message, reason)
  if job.attempts < job.max_attempts then
    retry(job, job.run_at, message)
  else
    finish(job, 'dead', now, {'last_error', message, 'dead_reason', reason})
  end
end

-- -- the end of every script that changes jobs ----------------------------------------

-- crawl_finish: each open crawl this script lowered to nothing pending or running
-- finishes: state finished, finished_at = now, and its on_finish spec scheduled (outside
-- any crawl). Siblings: crawlq_crawl_finish (postgres/migrations/0008_rules.sql) and
-- SQLiteStore._crawl_finish.
local function crawl_finish(now)
  for crawl, per_crawl in pairs(CRAWL_DELTA) do
    for counter, delta in pairs(per_crawl) do
      if delta ~= 0 then
        redis.call('HINCRBY', K.crawl(crawl), counter, delta)
      end
    end
  end
  CRAWL_DELTA = {}
  for _, crawl in ipairs(CRAWL_TOUCHED) do
    local v = redis.call('HMGET', K.crawl(crawl), 'pending', 'running', 'on_finish')
    if crawl_open(crawl) and tonumber(v[1]) == 0 and tonumber(v[2]) == 0 then
      if now == nil then
        now = clock('')
      end
      set_crawl_state(crawl, 'finished', {'finished_at', fmt(now)})
      if v[3] then
        local id = schedule(spec_from(cjson.decode(v[3]), now), now)
        if id and id ~= 0 then
          redis.call('HSET', K.crawl(crawl), 'on_finish_job', id)
        end
      end
    end
  end
  CRAWL_TOUCHED = {}
end

-- The workers waiting for jobs of the queue (job_wait_begin.lua) get run_at pushed
-- onto their wake lists; registrations that ran out are dropped instead. A queue
-- nobody waits for costs one ZRANGE.
local WAKE_LIST_MS = 60000
local function wake_waiters(queue, run_at)
  local waiters = K.waiters(queue)
  local found = redis.call('ZRANGE', waiters, 0, -1, 'WITHSCORES')
  if #found == 0 then
    return
  end
  local now = clock('')
  for i = 1, #found, 2 do
    if tonumber(found[i + 1]) > now then
      local list = K.wait_list(found[i])
      redis.call('RPUSH', list, fmt(run_at))
      redis.call('PEXPIRE', list, WAKE_LIST_MS)
    end
  end
  redis.call('ZREMRANGEBYSCORE', waiters, '-inf', fmt(now))
end

-- Every script that changes jobs ends with commit(now): it writes the crawl counters
-- (finishing crawls), then the count changes, and announces one wake-up per queue that
-- got a pending job, saying when it is due: published (job_wait) and pushed to the
-- queue's waiters (wake_waiters).
local function commit(now)
  crawl_finish(now)
  limit_flush()
  cpend_flush()
  for queue, per_queue in pairs(COUNTS) do
    for state, delta in pairs(per_queue) do
      if delta ~= 0 then
        redis.call('HINCRBY', K.counts(queue), state, delta)
      end
    end
  end
  for queue, run_at in pairs(WAKE) do
    redis.call('PUBLISH', K.wake(queue), fmt(run_at))
    wake_waiters(queue, run_at)
  end
end

-- -- filters: listing, requeueing and purging (crawlq.stores.base.JobFilter) ----------

-- 8 arguments from ARGV[i]: after_id, ids? (comma list), queue?, task?, states?
-- (comma list), finished_before?, limit (-1: none), budget (ids to look at).
local function read_filter(i)
  local f = {
    after = tonumber(ARGV[i]), queue = opt(ARGV[i + 2]), task = opt(ARGV[i + 3]),
    finished_before = opt_number(ARGV[i + 5]), limit = tonumber(ARGV[i + 6]),
    budget = tonumber(ARGV[i + 7]), key = opt(ARGV[i + 8]), crawl = opt(ARGV[i + 9]),
    limit_key = opt(ARGV[i + 10]),
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
  local v = redis.call('HMGET', K.job(id), 'queue', 'task', 'state', 'finished_at', 'key',
    'crawl_id', 'limit_key')
  if not v[1] then
    return false
  end
  if (f.queue and v[1] ~= f.queue) or (f.task and v[2] ~= f.task) then
    return false
  end
  if (f.key and v[5] ~= f.key) or (f.crawl and v[6] ~= f.crawl)
      or (f.limit_key and v[7] ~= f.limit_key) then
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

-- -- each call's opening -----------------------------------------------------------

-- The call's arguments (ARGV[1] is the key prefix) and fresh per-call tables.
local function begin(argv)
  ARGV, PREFIX = argv, argv[1]
  WAKE, COUNTS, PRIOS, QUEUES, LIMITS, CPEND = {}, {}, {}, {}, {}, {}
  CRAWL_STATE, CRAWL_DELTA, CRAWL_TOUCHED, TOUCHED_SEEN = {}, {}, {}, {}
end
