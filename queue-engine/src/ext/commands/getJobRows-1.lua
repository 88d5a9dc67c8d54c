-- KEYS[1]: a state's list or sorted set. ARGV: the job key base (`<prefix>:<queue>:`),
-- "list" or "zset", start, stop, "1" for oldest first, the cut of every string.
-- Returns the rows of the jobs in that range (see add_row).
local out = {}
local cap = tonumber(ARGV[6])
for _, id in ipairs(ids_in(KEYS[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5] == "1")) do
  add_row(out, ARGV[1], id, cap)
end
return out
