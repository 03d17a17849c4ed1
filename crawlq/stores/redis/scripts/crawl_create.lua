-- crawl_create.lua: create a running crawl and schedule its start jobs, atomically.
--
-- The id was issued by INCR {p}:crawlids beforehand (ids are never reused: an id whose
-- script refused nothing but was never created is just skipped). With no start job
-- left scheduled (none, or all seen) the crawl finishes here, on_finish included.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, crawl id, name, meta (JSON), on_finish (a spec row as JSON, its
--          kwargs holding crawl_id; '' = none), limits (JSON; '' = none), start specs
--          (a JSON list of spec rows, their crawl = the id)
-- Returns: the crawl's hash as {field, value, ...}.
-- Touches: {p}:crawls, {p}:crawl:{crawl}, and everything job_schedule.lua touches

local now = clock(ARGV[2])
local crawl = ARGV[3]
local specs = specs_from(cjson.decode(ARGV[8]), now)
local fields = {
  'name', ARGV[4], 'meta', ARGV[5], 'pending', 0, 'running', 0, 'done', 0, 'dead', 0,
  'cancelled', 0, 'seen', 0, 'created_at', fmt(now),
}
if ARGV[6] ~= '' then
  fields[#fields + 1] = 'on_finish'
  fields[#fields + 1] = ARGV[6]
end
if ARGV[7] ~= '' then
  fields[#fields + 1] = 'limits'
  fields[#fields + 1] = ARGV[7]
end
set_crawl_state(crawl, 'running', fields)
redis.call('ZADD', K.crawls(), crawl, crawl)
for _, spec in ipairs(specs) do
  schedule(spec, now)
end
TOUCHED_SEEN[crawl] = true
CRAWL_TOUCHED[#CRAWL_TOUCHED + 1] = crawl
commit(now)
return redis.call('HGETALL', K.crawl(crawl))
