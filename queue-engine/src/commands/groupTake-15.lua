--[[
  Fair groups: take the next job, one group after the other (our script,
  beside BullMQ's moveToActive; see groupCommon.lua for the layout). Returns
  what moveToActive returns, so a worker reads both alike.

  Each call, in this order:
    0. gives back the slot of the attempt the calling task just finished, if
       ARGV[7] names one (as groupRelease does: a task takes its next job and
       frees its last one's slot in one call);
    1. moves due delayed jobs, and up to ADOPT_BATCH jobs from 'wait', into
       their groups (they wait in 'prioritized' meanwhile);
    2. gives rate-limited groups whose window ended back to the ring, and looks
       again at the group that has been full the longest (slots whose lock is
       gone are given back: a worker died, or finished without releasing);
    3. honours the queue's pause, global concurrency and rate limit;
    4. pops groups from the ring until one can start a job, takes its first
       job (by priority, then order), and puts the group back at the end of
       the ring if it can start another.
  Every step is bounded, so the cost of a take does not grow with the number
  of groups.

  Input:
    KEYS[1] wait key
    KEYS[2] active key
    KEYS[3] prioritized key
    KEYS[4] stream events key
    KEYS[5] stalled key (unused, kept for moveToActive's key order)
    KEYS[6] rate limiter key
    KEYS[7] delayed key
    KEYS[8] paused key (unused)
    KEYS[9] meta key
    KEYS[10] pc priority counter
    KEYS[11] marker key
    KEYS[12] group ring
    KEYS[13] known groups
    KEYS[14] rate-limited groups
    KEYS[15] full groups
    ARGV[1] key prefix
    ARGV[2] timestamp
    ARGV[3] opts (msgpack: token, lockDuration, name, limiter), as moveToActive
    ARGV[4] group concurrency (0: none)
    ARGV[5] group rate limit: starts per window (0: none)
    ARGV[6] group rate limit: window (ms)
    ARGV[7] group of the slot to give back ("" for none)
    ARGV[8] its job id
    ARGV[9] its lock token
]]
local ADOPT_BATCH = 500
local RING_BATCH = 1000
-- Ids of jobs removed while they waited in a group, passed over in one take at most.
local staleBudget = 200

local waitKey = KEYS[1]
local activeKey = KEYS[2]
local prioritizedKey = KEYS[3]
local eventStreamKey = KEYS[4]
local rateLimiterKey = KEYS[6]
local delayedKey = KEYS[7]
local metaKey = KEYS[9]
local pcKey = KEYS[10]
local markerKey = KEYS[11]
local ringKey = KEYS[12]
local knownKey = KEYS[13]
local limitedKey = KEYS[14]
local fullKey = KEYS[15]
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local opts = cmsgpack.unpack(ARGV[3])
local defaults = { tonumber(ARGV[4]) or 0, tonumber(ARGV[5]) or 0, tonumber(ARGV[6]) or 0 }

local function rejoin(group)
  return groupRejoin(prefix, group, defaults, ringKey, limitedKey, fullKey, markerKey, now)
end

-- Moves one job into its group: ordered there and in 'prioritized' by its
-- priority (the group's, else BullMQ's), then by arrival. A job coming back
-- (stalled, retried) gives back the slot it held.
local function adopt(jobId)
  local jobKey = prefix .. jobId
  local fields = rcall("HMGET", jobKey, "opts", "priority")
  if not fields[1] then return nil end
  local group, groupPriority = groupOfOpts(fields[1])
  local priority = tonumber(fields[2]) or 0
  if groupPriority and groupPriority ~= priority then
    priority = groupPriority
    rcall("HSET", jobKey, "priority", priority)
  end
  local score = priority * 0x100000000 + rcall("INCR", pcKey) % 0x100000000
  rcall("ZADD", prioritizedKey, score, jobId)
  rcall("ZADD", groupKey(prefix, group, "wait"), score, jobId)
  rcall("HDEL", groupKey(prefix, group, "active"), jobId)
  rcall("ZADD", knownKey, 0, group)
  return group
end

local function promoteDueDelayed()
  local due = rcall("ZRANGEBYSCORE", delayedKey, 0, (now + 1) * 0x1000 - 1, "LIMIT", 0, ADOPT_BATCH)
  if #due == 0 then return end
  rcall("ZREM", delayedKey, unpack(due))
  for _, jobId in ipairs(due) do
    local group = adopt(jobId)
    if group then
      rcall("HSET", prefix .. jobId, "delay", 0)
      rcall("XADD", eventStreamKey, "*", "event", "waiting", "jobId", jobId, "prev", "delayed")
      rejoin(group)
    end
  end
end

local function adoptWaiting()
  for _ = 1, ADOPT_BATCH do
    local jobId = rcall("RPOP", waitKey)
    if not jobId then return end
    -- BullMQ 4's markers in the wait list are not jobs.
    if string.sub(jobId, 1, 2) ~= "0:" then
      local group = adopt(jobId)
      if group then rejoin(group) end
    end
  end
end

local function reviewBlockedGroups()
  local free = rcall("ZRANGEBYSCORE", limitedKey, 0, now, "LIMIT", 0, 10)
  for _, group in ipairs(free) do
    rcall("ZREM", limitedKey, group)
    rejoin(group)
  end
  local oldest = rcall("ZRANGE", fullKey, 0, 0, "WITHSCORES")
  local lockDuration = tonumber(opts["lockDuration"]) or 30000
  if #oldest > 0 and tonumber(oldest[2]) + lockDuration <= now then
    local group = oldest[1]
    rcall("ZREM", fullKey, group)
    groupDropLostSlots(prefix, group)
    if not rejoin(group) then
      rcall("ZADD", fullKey, "XX", now, group)
    end
    groupForgetIfIdle(prefix, group, knownKey)
  end
end

-- The group's first job still waiting in 'prioritized' (ids of jobs removed
-- meanwhile are dropped on the way, within the take's budget).
local function popGroupJob(group)
  local waitingKey = groupKey(prefix, group, "wait")
  while staleBudget > 0 do
    local popped = rcall("ZPOPMIN", waitingKey)
    if #popped == 0 then return nil end
    if rcall("ZREM", prioritizedKey, popped[1]) == 1 then return popped[1] end
    staleBudget = staleBudget - 1
  end
  return nil
end

-- BullMQ's queue-level checks: paused, global concurrency, rate limit.
local function queueHeld()
  local meta = rcall("HMGET", metaKey, "paused", "concurrency", "max", "duration")
  if meta[1] then return true, 0 end
  if meta[2] and rcall("LLEN", activeKey) >= tonumber(meta[2]) then return true, 0 end
  local max = tonumber(meta[3] or (opts["limiter"] and opts["limiter"]["max"]))
  local duration = tonumber((opts["limiter"] and opts["limiter"]["duration"]) or meta[4])
  if max and max <= (tonumber(rcall("GET", rateLimiterKey)) or 0) then
    local ttl = rcall("PTTL", rateLimiterKey)
    if ttl > 0 then return true, ttl end
    if ttl == 0 then rcall("DEL", rateLimiterKey) end
  end
  return false, 0, max, duration
end

-- Locks the job and marks it started, as moveToActive does.
local function start(jobId, group, groupMax, groupDuration, max, duration)
  local jobKey = prefix .. jobId
  rcall("LPUSH", activeKey, jobId)
  rcall("HSET", groupKey(prefix, group, "active"), jobId, opts["token"])
  if groupMax > 0 then
    local limiterKey = groupKey(prefix, group, "limiter")
    if rcall("INCR", limiterKey) == 1 then
      rcall("PEXPIRE", limiterKey, math.max(1, math.floor(groupDuration)))
    end
  end
  if max and rcall("HEXISTS", jobKey, "defa") == 0 then
    if rcall("INCR", rateLimiterKey) == 1 then
      rcall("PEXPIRE", rateLimiterKey, math.floor(math.abs(duration or 0)))
    end
  end
  if opts["token"] ~= "0" then
    rcall("SET", jobKey .. ":lock", opts["token"], "PX", opts["lockDuration"])
  end
  rcall("XADD", eventStreamKey, "*", "event", "active", "jobId", jobId, "prev", "waiting")
  if opts["name"] then
    rcall("HSET", jobKey, "processedOn", now, "pb", opts["name"])
  else
    rcall("HSET", jobKey, "processedOn", now)
  end
  rcall("HINCRBY", jobKey, "ats", 1)
  rejoin(group)
  rcall("ZADD", markerKey, 0, "0")
  return { rcall("HGETALL", jobKey), jobId, 0, 0 }
end

local function nextWake()
  local next = nil
  local delayed = rcall("ZRANGE", delayedKey, 0, 0, "WITHSCORES")
  if #delayed > 0 then next = math.floor(tonumber(delayed[2]) / 0x1000) end
  local limited = rcall("ZRANGE", limitedKey, 0, 0, "WITHSCORES")
  if #limited > 0 and (next == nil or tonumber(limited[2]) < next) then next = tonumber(limited[2]) end
  local full = rcall("ZRANGE", fullKey, 0, 0, "WITHSCORES")
  if #full > 0 then
    local repairAt = tonumber(full[2]) + (tonumber(opts["lockDuration"]) or 30000)
    if next == nil or repairAt < next then next = repairAt end
  end
  return next
end

if ARGV[7] ~= nil and ARGV[8] ~= nil and ARGV[8] ~= "" then
  local slotsKey = groupKey(prefix, ARGV[7], "active")
  if rcall("HGET", slotsKey, ARGV[8]) == ARGV[9] then
    rcall("HDEL", slotsKey, ARGV[8])
  end
  rejoin(ARGV[7])
  groupForgetIfIdle(prefix, ARGV[7], knownKey)
end

local held, ttl, max, duration = queueHeld()
-- A paused (or globally maxed) queue's jobs stay where BullMQ keeps them.
if held and ttl == 0 then return { 0, 0, 0, 0 } end

promoteDueDelayed()
adoptWaiting()
reviewBlockedGroups()

if held then return { 0, 0, ttl, 0 } end

for _ = 1, RING_BATCH do
  local group = rcall("RPOP", ringKey)
  if not group then break end
  rcall("HDEL", groupKey(prefix, group, "meta"), "ring")
  local block, _, groupMax, groupDuration = groupBlock(prefix, group, defaults)
  if block == nil then
    local jobId = popGroupJob(group)
    if jobId then
      return start(jobId, group, groupMax, groupDuration, max, duration)
    end
  end
  rejoin(group)
  groupForgetIfIdle(prefix, group, knownKey)
  if staleBudget <= 0 then break end
end

if rcall("LLEN", ringKey) > 0 then rcall("ZADD", markerKey, 0, "0") end
local wake = nextWake()
if wake then return { 0, 0, 0, wake } end
return { 0, 0, 0, 0 }
