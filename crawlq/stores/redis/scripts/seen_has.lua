-- seen_has.lua: which fingerprints a crawl's seen set holds (Store.seen_has).
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now (unused), crawl id, fingerprint (16 raw bytes)...
-- Returns: 1 per fingerprint in the set, 0 per other, in order; or -1 alone if there is
--          no such crawl.
-- Touches: {p}:crawl:{crawl}, {p}:seen:{crawl} (read only)

local crawl = ARGV[3]
if crawl_state(crawl) == nil then
  return {-1}
end
local seen = K.seen(crawl)
local answers = {}
for i = 4, #ARGV do
  answers[#answers + 1] = redis.call('SISMEMBER', seen, ARGV[i])
end
return answers
