--[[
  Fair groups: removes up to ARGV[2] grouped jobs waiting their turn, with
  their keys, as BullMQ's drain removes waiting jobs (our script; see
  groupCommon.lua). The caller repeats it until it answers 0, then clears the
  groups' waiting sets. ARGV[3], if not "", removes only jobs added at or
  before that time (ms), as clean does; then the jobs looked at are the
  oldest ARGV[2] ones.

  Input:
    KEYS[1] grouped jobs waiting (gs:waiting)
    ARGV[1] key prefix
    ARGV[2] how many
    ARGV[3] added at or before (ms), or ""
  Output:
    { removed ids... }
]]
local prefix = ARGV[1]
local ids = rcall("ZRANGE", KEYS[1], 0, tonumber(ARGV[2]) - 1)
local before = tonumber(ARGV[3])
local removed = {}
for _, jobId in ipairs(ids) do
  local jobKey = prefix .. jobId
  local fields = rcall("HMGET", jobKey, "opts", "timestamp")
  if before == nil or (tonumber(fields[2]) or 0) <= before then
    local group = groupOfOpts(fields[1])
    rcall("ZREM", groupKey(prefix, group, "wait"), jobId)
    rcall("ZREM", KEYS[1], jobId)
    rcall("DEL", jobKey, jobKey .. ":logs", jobKey .. ":dependencies", jobKey .. ":processed",
      jobKey .. ":failed", jobKey .. ":unsuccessful")
    removed[#removed + 1] = jobId
  end
end
return removed
