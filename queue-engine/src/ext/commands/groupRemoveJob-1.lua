--[[
  Fair groups: a job removed while it waits in its group leaves it (our
  script, sent before BullMQ's removeJob, which knows nothing of groups; see
  groupCommon.lua). A job removed by another client is passed over by the
  take that pops it instead.

  Input:
    KEYS[1] grouped jobs waiting (gs:waiting)
    ARGV[1] key prefix
    ARGV[2] job id
  Output:
    1 if the job was waiting in a group, else 0
]]
if rcall("ZREM", KEYS[1], ARGV[2]) == 0 then return 0 end
local group = groupOfOpts(rcall("HGET", ARGV[1] .. ARGV[2], "opts"))
rcall("ZREM", groupKey(ARGV[1], group, "wait"), ARGV[2])
return 1
