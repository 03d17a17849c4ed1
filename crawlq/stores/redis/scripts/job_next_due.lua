-- job_next_due.lua: the earliest run_at among the pending jobs of some queues, and the
-- server's clock (job_wait compares the two).
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now (unused: the clock is always Redis TIME), queue...
-- Returns: {run_at or '', now}, both as %.17g text.
-- Touches: {p}:q:{queue}:prios, {p}:q:{queue}:p:{priority} (read only)

local first = nil
for i = 3, #ARGV do
  local t = first_run_at(ARGV[i])
  if t ~= nil and (first == nil or t < first) then
    first = t
  end
end
return {first and fmt(first) or '', fmt(clock(''))}
