-- job_complete_claim.lua: a worker's turn in one call: job_complete.lua, then job_claim.lua
-- (Store.job_complete_claim).
--
-- The two run as they do alone, one after the other, each with its own commit: the claim
-- sees what the completions wrote (children, follow-ups, freed running slots of limit
-- keys, an on_finish job). `-- Parts:` below makes lua.py put the body of each named
-- script before this one as a local function of that script's ARGV, so neither body is
-- written twice.
--
-- KEYS:    none; names are built from the prefix (keys.py)
-- ARGV:    prefix, now, completions (job_complete.lua's ARGV[3]), worker_id, limit,
--          queue... (job_claim.lua's ARGV[3] on)
-- Returns: {job_complete.lua's reply, job_claim.lua's reply}
-- Touches: everything job_complete.lua and job_claim.lua touch
-- Parts:   job_complete job_claim

local claim = {ARGV[1], ARGV[2]}
for i = 4, #ARGV do
  claim[#claim + 1] = ARGV[i]
end
local answers = job_complete({ARGV[1], ARGV[2], ARGV[3]})
return {answers, job_claim(claim)}
