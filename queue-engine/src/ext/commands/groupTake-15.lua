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

local function rejoin(group, outOfRing)
  return groupRejoin(prefix, group, defaults, ringKey, limitedKey, fullKey, markerKey, now, outOfRing)
end

-- Moves one job into its group: ordered there and in 'prioritized' by its
-- priority (the group's, else BullMQ's), then by arrival (order: its number
-- from BullMQ's priority counter, taken for the whole batch at once). A job
-- coming back (stalled, retried) gives back the slot it held.
local function adopt(jobId, order)
  local jobKey = prefix .. jobId
  local fields = rcall("HMGET", jobKey, "opts", "priority", "ats")
  if not fields[1] then return nil end
  local group, groupPriority = groupOfOpts(fields[1])
  local priority = tonumber(fields[2]) or 0
  if groupPriority and groupPriority ~= priority then
    priority = groupPriority
    rcall("HSET", jobKey, "priority", priority)
  end
  local score = priority * 0x100000000 + order % 0x100000000
  rcall("ZADD", prioritizedKey, score, jobId)
  rcall("ZADD", groupKey(prefix, group, "wait"), score, jobId)
  -- Only a job that started before (stalled, retried) can hold a slot.
  if (tonumber(fields[3]) or 0) > 0 then
    rcall("HDEL", groupKey(prefix, group, "active"), jobId)
  end
  return group
end

-- After adopting a job: a group in the ring is known and can start it already.
-- Once a take per group: the first settle put it in the ring or filed it.
local settled = {}
local function settle(group)
  if settled[group] then return end
  settled[group] = true
  if rcall("HEXISTS", groupKey(prefix, group, "meta"), "ring") == 0 then
    rcall("ZADD", knownKey, 0, group)
    rejoin(group, true)
  end
end

-- The first of n numbers from BullMQ's priority counter, for a batch of adoptions.
local function takeOrders(n)
  return rcall("INCRBY", pcKey, n) - n + 1
end

local function promoteDueDelayed()
  local due = rcall("ZRANGEBYSCORE", delayedKey, 0, (now + 1) * 0x1000 - 1, "LIMIT", 0, ADOPT_BATCH)
  if #due == 0 then return end
  rcall("ZREM", delayedKey, unpack(due))
  local first = takeOrders(#due)
  for i, jobId in ipairs(due) do
    local group = adopt(jobId, first + i - 1)
    if group then
      rcall("HSET", prefix .. jobId, "delay", 0)
      rcall("XADD", eventStreamKey, "*", "event", "waiting", "jobId", jobId, "prev", "delayed")
      settle(group)
    end
  end
end

-- Up to ADOPT_BATCH jobs from the consuming (right) end of 'wait', oldest
-- first, in three commands for the batch.
local function adoptWaiting()
  local ids = rcall("LRANGE", waitKey, -ADOPT_BATCH, -1)
  if #ids == 0 then return end
  rcall("LTRIM", waitKey, 0, -(#ids + 1))
  local first = takeOrders(#ids)
  for i = #ids, 1, -1 do
    local jobId = ids[i]
    -- BullMQ 4's markers in the wait list are not jobs.
    if string.sub(jobId, 1, 2) ~= "0:" then
      local group = adopt(jobId, first + #ids - i)
      if group then settle(group) end
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
    local inRing, block = rejoin(group)
    if not inRing then
      groupForgetIfIdle(prefix, group, knownKey, block == "empty")
    end
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

-- Locks the job and marks it started, as moveToActive does. The group came
-- out of the ring (its flag still set): it goes back at the end if it can start
-- another job, else is filed where later takes look for it.
local function start(jobId, group, groupMax, groupDuration, concurrency, held, max, duration)
  local jobKey = prefix .. jobId
  rcall("LPUSH", activeKey, jobId)
  rcall("HSET", groupKey(prefix, group, "active"), jobId, opts["token"])
  local canGoOn = concurrency == 0 or held + 1 < concurrency
  if groupMax > 0 then
    local limiterKey = groupKey(prefix, group, "limiter")
    local started = rcall("INCR", limiterKey)
    if started == 1 then
      rcall("PEXPIRE", limiterKey, math.max(1, math.floor(groupDuration)))
    end
    canGoOn = canGoOn and started < groupMax
  end
  if canGoOn and rcall("ZCARD", groupKey(prefix, group, "wait")) > 0 then
    rcall("LPUSH", ringKey, group)
  else
    rcall("HDEL", groupKey(prefix, group, "meta"), "ring")
    rejoin(group, true)
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
  local inRing, block = rejoin(ARGV[7])
  if not inRing then
    groupForgetIfIdle(prefix, ARGV[7], knownKey, block == "empty")
  end
end

local held, ttl, max, duration = queueHeld()
-- A paused (or globally maxed) queue's jobs stay where BullMQ keeps them.
if held and ttl == 0 then return { 0, 0, 0, 0 } end

-- One look tells whether there are delayed jobs or blocked groups to see to.
local anythingHeldBack = rcall("EXISTS", delayedKey, limitedKey, fullKey) > 0
if anythingHeldBack then promoteDueDelayed() end
adoptWaiting()
if anythingHeldBack then reviewBlockedGroups() end

if held then return { 0, 0, ttl, 0 } end

for _ = 1, RING_BATCH do
  local group = rcall("RPOP", ringKey)
  if not group then break end
  local block, _, groupMax, groupDuration, concurrency, slots = groupBlock(prefix, group, defaults)
  if block == nil then
    local jobId = popGroupJob(group)
    if jobId then
      return start(jobId, group, groupMax, groupDuration, concurrency, slots, max, duration)
    end
  end
  rcall("HDEL", groupKey(prefix, group, "meta"), "ring")
  local inRing, why = rejoin(group, true)
  if not inRing then
    groupForgetIfIdle(prefix, group, knownKey, why == "empty")
  end
  if staleBudget <= 0 then break end
end

if rcall("LLEN", ringKey) > 0 then rcall("ZADD", markerKey, 0, "0") end
local wake = nextWake()
if wake then return { 0, 0, 0, wake } end
return { 0, 0, 0, 0 }
