--[[
  Fair groups: pause or resume one group, or set its own limits (our script;
  see groupCommon.lua). A paused group keeps its jobs and starts none; its
  running jobs finish. The ring is not searched: a paused group still in it is
  dropped by the next take that pops it, so this costs the same with any
  number of groups.

  Input:
    KEYS[1] group ring
    KEYS[2] known groups
    KEYS[3] rate-limited groups
    KEYS[4] full groups
    KEYS[5] marker key
    ARGV[1] key prefix
    ARGV[2] group
    ARGV[3] action: "pause" | "resume" | "limits"
    ARGV[4] timestamp
    ARGV[5] concurrency ("" to use the workers')   (limits only)
    ARGV[6] starts per window ("" to use the workers')
    ARGV[7] window (ms)
  Output:
    1
]]
local prefix = ARGV[1]
local group = ARGV[2]
local action = ARGV[3]
local metaKey = groupKey(prefix, group, "meta")
if action == "pause" then
  rcall("HSET", metaKey, "paused", 1)
  rcall("ZADD", KEYS[2], 0, group)
elseif action == "resume" then
  rcall("HDEL", metaKey, "paused")
elseif action == "limits" then
  if ARGV[5] == "" then
    rcall("HDEL", metaKey, "concurrency")
  else
    rcall("HSET", metaKey, "concurrency", ARGV[5])
  end
  if ARGV[6] == "" then
    rcall("HDEL", metaKey, "max", "duration")
  else
    rcall("HSET", metaKey, "max", ARGV[6], "duration", ARGV[7])
  end
  rcall("ZADD", KEYS[2], 0, group)
else
  return redis.error_reply("unknown group action " .. tostring(action))
end
if action ~= "pause" then
  -- The workers' limits are not known here: rejoin as if the group had none,
  -- and let the next take, which knows them, file it again if it must wait.
  rcall("ZREM", KEYS[4], group)
  rcall("ZREM", KEYS[3], group)
  groupRejoin(prefix, group, { 0, 0, 0 }, KEYS[1], KEYS[3], KEYS[4], KEYS[5], tonumber(ARGV[4]))
end
groupForgetIfIdle(prefix, group, KEYS[2])
return 1
