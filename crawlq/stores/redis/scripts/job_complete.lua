-- job_complete.lua: mark leased jobs done, schedule their children and keep their
-- records, atomically.
--
-- A stale lease changes nothing, schedules none of its children, keeps none of its
-- records. A job that ends
-- turns its remembered request (if any) into a pending job before its children. A child
-- or follow-up whose crawl is closed (or unknown) is dropped; the completion still
-- counts. Each crawl whose last job ended here finishes at commit (on_finish scheduled).
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, completions (a JSON list of [id, token, result as JSON text,
--          [child spec...], [record...]]; specs as in spec_from in the prelude, records
--          as keep_records reads them)
-- Returns: 1 per completion applied, 0 per stale lease, in order.
-- Touches: {p}:job:{id}, {p}:followup:{id}, {p}:running, {p}:wjobs:{worker},
--          {p}:q:{queue}:done, :counts, :keys, and everything job_schedule.lua touches
--          (followups, children), and result_add.lua's keys (records)
--          crawls: {p}:crawl:{crawl}, {p}:cpend:{crawl}; limits: {p}:limit:{lkey},
--          {p}:lwait:{lkey} (a finished crawl schedules its on_finish)

local now = clock(ARGV[2])
local completions = cjson.decode(ARGV[3])
for _, c in ipairs(completions) do
  c[4] = specs_from(c[4], now)  -- decode every spec before the first write
end
local answers = {}
for n, c in ipairs(completions) do
  local job = leased(c[1], c[2])
  if job then
    finish(job, 'done', now, {'result', c[3]})
    for _, spec in ipairs(c[4]) do
      schedule(spec, now)
    end
    keep_records(c[5])
  end
  answers[n] = job and 1 or 0
end
commit(now)
return answers
