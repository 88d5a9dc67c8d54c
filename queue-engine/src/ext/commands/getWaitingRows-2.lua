-- KEYS[1]: a queue's wait list; KEYS[2]: its grouped jobs waiting their turn
-- (gs:waiting, change 34). ARGV: as getJobRows's (the job key base, unused kind,
-- start, stop, "1" for oldest first, the cut of every string). The waiting jobs
-- are the list's, then the grouped ones: positions past the list's end read
-- those. Always the same commands, whatever the sizes.
local out = {}
local cap = tonumber(ARGV[6])
local start, stop = tonumber(ARGV[3]), tonumber(ARGV[4])
local asc = ARGV[5] == "1"
local listed = redis.call("LLEN", KEYS[1])
local ids = {}
if start < listed then
  ids = ids_in(KEYS[1], "list", start, math.min(stop, listed - 1), asc)
end
if stop >= listed then
  local from = math.max(start - listed, 0)
  for _, id in ipairs(ids_in(KEYS[2], "zset", from, stop - listed, asc)) do
    ids[#ids + 1] = id
  end
end
for _, id in ipairs(ids) do
  add_row(out, ARGV[1], id, cap)
end
return out
