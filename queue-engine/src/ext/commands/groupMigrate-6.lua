--[[
  Fair groups: moves one page of groups from the first layout (grouped jobs
  waiting in BullMQ's 'prioritized' as well as their group, a LIST ring
  'gs:ring', rate-limited and full groups in 'gs:limited' and 'gs:full') to
  this one (our script; see groupCommon.lua). The caller pages through the
  known groups by name, then deletes the old keys; the workers of the first
  layout must be stopped first. A page moved twice (two workers starting at
  once, a move cut short and started again) is moved once: a job already in
  gs:waiting stays where it is.

  Input:
    KEYS[1] known groups
    KEYS[2] the ring (gs:turns)
    KEYS[3] grouped jobs waiting (gs:waiting)
    KEYS[4] prioritized
    KEYS[5] the queue's meta
    KEYS[6] BullMQ's job counter ('id')
    ARGV[1] key prefix
    ARGV[2] "-" for the first page, else "(" .. the last group of the page before
    ARGV[3] page size
  Output:
    the groups of the page
]]
local G = groupContext({ ARGV[1], KEYS[2], KEYS[1], KEYS[3], KEYS[6] }, { 0, 0, 0 }, 0)
-- The workers' limits are not known here: a group's slots and settings keep it
-- known whatever they are (groupForgetIfIdle).
G.own = true
local groups = rcall("ZRANGEBYLEX", KEYS[1], ARGV[2], "+", "LIMIT", 0, tonumber(ARGV[3]))
for _, group in ipairs(groups) do
  local waitKey = groupKey(G.prefix, group, "wait")
  local waiting = rcall("ZRANGE", waitKey, 0, -1, "WITHSCORES")
  for i = 1, #waiting, 2 do
    local jobId = waiting[i]
    if rcall("ZREM", KEYS[4], jobId) == 1 then
      rcall("ZADD", KEYS[3], tonumber(waiting[i + 1]) % 0x100000000, jobId)
    elseif not rcall("ZSCORE", KEYS[3], jobId) then
      -- Neither the first layout's (in prioritized) nor this one's (in
      -- gs:waiting: a new producer's add, or a page moved already): removed.
      rcall("ZREM", waitKey, jobId)
    end
  end
  -- The first layout held a slot for every running job; this one only under
  -- a concurrency limit, and a slot whose lock is gone is nobody's.
  groupDropLostSlots(G, group)
  local metaKey = groupKey(G.prefix, group, "meta")
  rcall("HDEL", metaKey, "ring")
  if rcall("EXISTS", metaKey) == 1 then rcall("HSET", KEYS[5], OWN_SETTINGS, 1) end
  if rcall("HEXISTS", metaKey, "paused") == 1 then
    rcall("ZADD", G.ring, PAUSED, group)
  elseif rcall("ZCARD", waitKey) > 0 then
    rcall("ZADD", G.ring, "NX", turnNow(G), group)
  end
  -- A group left with nothing waiting, no slot (its slots were lost) and no
  -- settings is idle: forgotten, as this layout forgets such a group.
  groupForgetIfIdle(G, group)
end
return groups
