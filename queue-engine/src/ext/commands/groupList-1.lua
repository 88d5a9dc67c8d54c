--[[
  Fair groups: one page of the known groups, by name (our script; see
  groupCommon.lua).

  Input:
    KEYS[1] known groups
    ARGV[1] key prefix
    ARGV[2] "-" for the first page, else "(" .. the last name of the page before
    ARGV[3] page size
  Output (one array per group):
    { name, waiting, active, paused (0/1), concurrency or "", max or "", duration or "" }
]]
local prefix = ARGV[1]
local names = rcall("ZRANGEBYLEX", KEYS[1], ARGV[2], "+", "LIMIT", 0, tonumber(ARGV[3]))
local page = {}
for _, group in ipairs(names) do
  local meta = rcall("HMGET", groupKey(prefix, group, "meta"), "paused", "concurrency", "max", "duration")
  page[#page + 1] = {
    group,
    rcall("ZCARD", groupKey(prefix, group, "wait")),
    rcall("HLEN", groupKey(prefix, group, "active")),
    meta[1] and 1 or 0,
    meta[2] or "",
    meta[3] or "",
    meta[4] or "",
  }
end
return page
