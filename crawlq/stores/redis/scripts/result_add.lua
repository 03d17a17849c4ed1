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
local keys, records = K.result_keys(crawl), K.results(crawl)
local seq = redis.call('HLEN', keys)  -- seqs are 1 ... HLEN: none is ever deleted
local answers = {}
for i = 4, #ARGV, 2 do
  local added = redis.call('HSETNX', keys, ARGV[i], fmt_int(seq + 1))
  if added == 1 then
    seq = seq + 1
    redis.call('HSET', records, fmt_int(seq), ARGV[i + 1])
  end
  answers[#answers + 1] = added
end
return answers
