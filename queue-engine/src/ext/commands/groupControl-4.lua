--[[
  Fair groups: pause or resume one group, or set its own limits (our script;
  see groupCommon.lua). A paused group keeps its jobs and starts none; its
  running jobs finish. It waits in the ring at PAUSED, so that an add leaves it
  there; resuming gives it a turn. New limits give a group waiting at a limit
  a turn: the take that pops it applies them (the workers' own limits are not
  known here). A group given a turn wakes a worker as an add does (the
  marker): an idle one would otherwise find it only at the end of its wait
  (drain_delay, 5 s).

  Input:
    KEYS[1] the ring (gs:turns)
    KEYS[2] known groups
    KEYS[3] the queue's meta
    KEYS[4] the marker
    ARGV[1] key prefix
    ARGV[2] group
    ARGV[3] action: "pause" | "resume" | "limits"
    ARGV[4] concurrency ("" to use the workers')   (limits only)
    ARGV[5] starts per window ("" to use the workers')
    ARGV[6] window (ms)
  Output:
    1
]]
local group = ARGV[2]
local action = ARGV[3]
local G = groupContext({ ARGV[1], KEYS[1], KEYS[2], "", "" }, { 0, 0, 0 }, 0)
G.own = true
local metaKey = groupKey(G.prefix, group, "meta")
local waitKey = groupKey(G.prefix, group, "wait")
-- Gives the group a turn at the end of the ring, and wakes a worker to take it
-- (unless the queue is paused: its resume wakes one).
local function giveTurn()
  rcall("ZADD", G.ring, turnNow(G), group)
  if rcall("HEXISTS", KEYS[3], "paused") == 0 then rcall("ZADD", KEYS[4], 0, "0") end
end
if action == "pause" then
  rcall("HSET", metaKey, "paused", 1)
  rcall("ZADD", G.ring, PAUSED, group)
elseif action == "resume" then
  rcall("HDEL", metaKey, "paused")
  if rcall("ZSCORE", G.ring, group) then
    if rcall("ZCARD", waitKey) > 0 then
      giveTurn()
    else
      rcall("ZREM", G.ring, group)
    end
  end
elseif action == "limits" then
  if ARGV[4] == "" then
    rcall("HDEL", metaKey, "concurrency")
  else
    rcall("HSET", metaKey, "concurrency", ARGV[4])
  end
  if ARGV[5] == "" then
    rcall("HDEL", metaKey, "max", "duration")
  else
    rcall("HSET", metaKey, "max", ARGV[5], "duration", ARGV[6])
  end
  local score = tonumber(rcall("ZSCORE", G.ring, group))
  if score and score >= BLOCKED and score < PAUSED then
    giveTurn()
  end
else
  return redis.error_reply("unknown group action " .. tostring(action))
end
-- From now on takes read groups' own settings.
rcall("HSET", KEYS[3], OWN_SETTINGS, 1)
rcall("ZADD", G.known, 0, group)
groupForgetIfIdle(G, group)
return 1
