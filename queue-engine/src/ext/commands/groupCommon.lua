--[[
  Fair groups: the layout and the helpers every group script shares (this file
  is put in front of each of them by scripts.rs).

  A grouped job is an ordinary BullMQ job. Producers add it with BullMQ's own
  add scripts, its group in its options: opts.group = { id = "tenant-42" }
  (optionally opts.group.priority). It lands in 'wait' (or 'delayed') as any
  job does; the take script moves it into its group ("adopts" it) and keeps it
  in BullMQ's 'prioritized' set while it waits its turn, so BullMQ's getters,
  counts and Bull Board list it as prioritized.

  Keys (P is the queue's key prefix, "bull:<queue>:"; no job key has this
  shape, job ids having no ':'):
    P.."gs:ring"     LIST  groups that may start a job now, in turn: the take
                           pops from the right, a group rejoins on the left
    P.."gs:known"    ZSET  groups with waiting or active jobs or settings,
                           all at score 0 (ordered by name, for paging)
    P.."gs:limited"  ZSET  groups at their rate limit: when the window ends (ms)
    P.."gs:full"     ZSET  groups at their concurrency with jobs waiting: when
                           last looked at (ms), for the lost-slot repair
    P.."g:"..id..":wait"    ZSET  the group's waiting jobs, by priority then order
    P.."g:"..id..":active"  HASH  job id -> lock token of each slot held
    P.."g:"..id..":meta"    HASH  ring (in the ring), paused, concurrency, max,
                                  duration (the group's own limits)
    P.."g:"..id..":limiter" STRING starts in the current rate window

  Invariant: a group is in the ring (meta.ring = 1, once) only while it has
  waiting jobs, is not paused, and is under its concurrency and rate limits;
  the scripts that change any of those put it in or leave it out, so a take
  pops groups that can start a job, whatever the number of groups.
]]
local rcall = redis.call

local function groupKey(prefix, group, suffix)
  return prefix .. "g:" .. group .. ":" .. suffix
end

-- The group of a job, from its stored options; "" for a job without one.
local function groupOfOpts(optsJson)
  if not optsJson then return "", nil end
  local ok, opts = pcall(cjson.decode, optsJson)
  if ok and type(opts) == "table" and type(opts["group"]) == "table" then
    local id = opts["group"]["id"]
    -- A Node producer may give a number: the group is its decimal text.
    if type(id) == "number" then id = tostring(id) end
    if type(id) == "string" and id ~= "" then
      return id, tonumber(opts["group"]["priority"]), opts["lifo"]
    end
  end
  if ok and type(opts) == "table" then
    return "", nil, opts["lifo"]
  end
  return "", nil, nil
end

-- limits: { concurrency, max, duration } from the worker (0 = none); a group's
-- own settings win.
local function groupLimits(meta, defaults)
  local concurrency = tonumber(meta[2]) or defaults[1]
  local max = tonumber(meta[3]) or defaults[2]
  local duration = tonumber(meta[4]) or defaults[3]
  return concurrency, max, duration
end

-- Slots whose lock is gone (finished without a release, or the worker died)
-- are given back. Bounded by the group's concurrency.
local function groupDropLostSlots(prefix, group)
  local activeKey = groupKey(prefix, group, "active")
  local slots = rcall("HGETALL", activeKey)
  for i = 1, #slots, 2 do
    local lock = rcall("GET", prefix .. slots[i] .. ":lock")
    if lock ~= slots[i + 1] then
      rcall("HDEL", activeKey, slots[i])
    end
  end
end

-- Why a group cannot start a job now: "paused", "empty", "full", "limited"
-- (with the ms until its window ends), or nil when it can; then the group's
-- rate limit (starts per window, window in ms), its concurrency and its slots
-- held (when counted).
local function groupBlock(prefix, group, defaults)
  local meta = rcall("HMGET", groupKey(prefix, group, "meta"), "paused", "concurrency", "max", "duration")
  local concurrency, max, duration = groupLimits(meta, defaults)
  if meta[1] then return "paused", 0, max, duration, concurrency end
  if rcall("ZCARD", groupKey(prefix, group, "wait")) == 0 then return "empty", 0, max, duration, concurrency end
  local held = 0
  if concurrency > 0 then
    held = rcall("HLEN", groupKey(prefix, group, "active"))
    if held >= concurrency then return "full", 0, max, duration, concurrency end
  end
  if max > 0 then
    local limiterKey = groupKey(prefix, group, "limiter")
    if (tonumber(rcall("GET", limiterKey)) or 0) >= max then
      local ttl = rcall("PTTL", limiterKey)
      if ttl > 0 then return "limited", ttl, max, duration, concurrency end
      rcall("DEL", limiterKey)
    end
  end
  return nil, 0, max, duration, concurrency, held
end

-- Puts a group in the ring if it can start a job, else files it where the
-- scripts look for it again. Returns true when the group is (now) in the ring,
-- else false and why not (a groupBlock reason). outOfRing: the caller knows
-- the group is not in the ring. A group is taken out of the full and limited
-- sets only where its limits could have put it there (a group filed under
-- limits since removed stays until the take's review passes it): every
-- command counts, a take being a few dozen of them.
local function groupRejoin(prefix, group, defaults, ringKey, limitedKey, fullKey, markerKey, now, outOfRing)
  local metaKey = groupKey(prefix, group, "meta")
  if not outOfRing and rcall("HEXISTS", metaKey, "ring") == 1 then return true end
  local block, ttl, max, _, concurrency = groupBlock(prefix, group, defaults)
  if block == "full" then
    rcall("ZADD", fullKey, "NX", now, group)
  elseif block == "limited" then
    rcall("ZADD", limitedKey, now + ttl, group)
  else
    if concurrency > 0 then rcall("ZREM", fullKey, group) end
    if max > 0 then rcall("ZREM", limitedKey, group) end
    if block == nil then
      rcall("HSET", metaKey, "ring", 1)
      rcall("LPUSH", ringKey, group)
      rcall("ZADD", markerKey, 0, "0")
      return true
    end
  end
  return false, block
end

-- Forgets a group that has nothing waiting, nothing active and no settings
-- (waitEmpty: the caller just found nothing waiting).
local function groupForgetIfIdle(prefix, group, knownKey, waitEmpty)
  if (waitEmpty or rcall("ZCARD", groupKey(prefix, group, "wait")) == 0)
      and rcall("EXISTS", groupKey(prefix, group, "active"), groupKey(prefix, group, "meta")) == 0 then
    rcall("ZREM", knownKey, group)
  end
end
