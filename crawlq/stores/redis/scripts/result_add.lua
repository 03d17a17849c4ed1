-- result_add.lua: keep records in a crawl's results (open or closed), each under its key,
-- numbered in order (Store.result_add).
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now (unused), crawl id, then pairs: key (16 raw bytes), record
-- Returns: 1 per new key, 0 per known one (or a repeat in the batch: the first record
--          stays), in order; or -1 alone if there is no such crawl (nothing written).
-- Touches: {p}:crawl:{crawl} (read only), {p}:rkeys:{crawl}, {p}:results:{crawl}

local crawl = ARGV[3]
if crawl_state(crawl) == nil then
  return {-1}
end
local answers = {}
for i = 4, #ARGV, 2 do
  answers[#answers + 1] = keep_result(crawl, ARGV[i], ARGV[i + 1])
end
return answers
