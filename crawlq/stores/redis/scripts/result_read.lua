-- result_read.lua: the number of a crawl's results (Store.result_count), a page of its
-- records in seq order (Store.result_list), or the records of given keys
-- (Store.result_get).
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now (unused), crawl id, mode ('count', 'list' or 'get'), then for
--          list: after, limit (whole numbers >= 0); for get: the keys (16 raw bytes each)
-- Returns: {-1} if there is no such crawl; else {n} (count), {n, record...} (list: the
--          records of seqs after + 1, after + 2, ..., at most limit of them) or
--          {n, record or false...} (get: one per key, false for a key without a record),
--          where n is the crawl's number of results.
-- Touches: {p}:crawl:{crawl}, {p}:rkeys:{crawl}, {p}:results:{crawl} (read only)

local crawl = ARGV[3]
if crawl_state(crawl) == nil then
  return {-1}
end
local n = redis.call('HLEN', K.result_keys(crawl))
local reply = {n}
if ARGV[4] == 'get' then
  local result_keys = K.result_keys(crawl)
  for i = 5, #ARGV do
    local seq = redis.call('HGET', result_keys, ARGV[i])
    reply[#reply + 1] = seq and redis.call('HGET', K.results(crawl), seq) or false
  end
  return reply
end
if ARGV[4] ~= 'list' then
  return reply
end
local after, limit = tonumber(ARGV[5]), tonumber(ARGV[6])
local last = math.min(n, after + limit)
local records = K.results(crawl)
for first = after + 1, last, 1000 do
  local seqs = {}
  for seq = first, math.min(first + 999, last) do
    seqs[#seqs + 1] = fmt_int(seq)
  end
  for _, record in ipairs(redis.call('HMGET', records, unpack(seqs))) do
    reply[#reply + 1] = record
  end
end
return reply
