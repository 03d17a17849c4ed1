-- job_list.lua: one page of the jobs matching a filter, in id order.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now (unused), then the 11 filter arguments (read_filter in the prelude)
-- Returns: {cursor, done, matched, jobs}: the last id looked at, 1 when nothing is left
--          to look at, how many matched, and the jobs as a JSON list of
--          [id, [field, value, ...]].
-- Touches: {p}:jobs, {p}:job:{id} (read only)

local found = {}
local cursor, done, matched = scan(read_filter(3), function(id)
  found[#found + 1] = job_reply(id)
end)
return {cursor, done, matched, encode_list(found)}
