-- seen_add.lua: add fingerprints to a crawl's seen set (open or closed).
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now (unused), crawl id, fingerprint (16 raw bytes)...
-- Returns: 1 per new fingerprint, 0 per known one (or a repeat in the batch), in
--          order; or -1 alone if there is no such crawl (nothing written).
-- Touches: {p}:crawl:{crawl}, {p}:seen:{crawl}

local crawl = ARGV[3]
if crawl_state(crawl) == nil then
  return {-1}
end
local seen, new = K.seen(crawl), 0
local answers = {}
for i = 4, #ARGV do
  local added = redis.call('SADD', seen, ARGV[i])
  answers[#answers + 1] = added
  new = new + added
end
if new > 0 then
  redis.call('HINCRBY', K.crawl(crawl), 'seen', new)
end
return answers
