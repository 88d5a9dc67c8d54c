-- KEYS[1]: a queue's wait list; KEYS[2]: its grouped jobs waiting their turn
-- (gs:waiting, change 34). ARGV: as getJobRows's (the job key base, unused kind,
-- start, stop, "1" for oldest first, the cut of every string). The waiting jobs
-- are the list's, then the grouped ones: positions past the list's end read
-- those. Always the same commands, whatever the sizes.
local out = {}
local cap = tonumber(ARGV[6])
local start, stop = tonumber(ARGV[3]), tonumber(ARGV[4])
local asc = ARGV[5] == "1"
local ids = waiting_ids_in(KEYS[1], KEYS[2], start, stop, asc)
for _, id in ipairs(ids) do
  add_row(out, ARGV[1], id, cap)
end
return out
