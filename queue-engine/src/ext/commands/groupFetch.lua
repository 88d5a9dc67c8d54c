--[[
  Fair groups: taking the next job, one group after the other (put after
  groupCommon.lua in front of groupTake and groupFinish; the layout is in
  groupCommon.lua).

  A take, in this order:
    1. reads the queue's meta (paused, global concurrency, rate limit, and
       whether any group has settings of its own), and gives back the slot of
       the attempt its caller just finished, if it names one;
    2. honours the queue's pause and global concurrency;
    3. on the takes that look around (one in a few, as the worker asks, and
       any take whose ring has nothing): when 'wait' or 'delayed' holds
       anything (one EXISTS tells), moves due delayed jobs and up to
       ADOPT_BATCH jobs of 'wait' into their groups; when a limit can apply,
       gives groups whose rate window ended a turn, and looks again at the
       group at its concurrency the longest (slots whose lock is gone are given
       back: a worker died);
    4. honours the queue's rate limit;
    5. pops the ring until a group can start a job, starts that group's first
       job (by priority, then arrival) as BullMQ's moveToActive does, and puts
       the group back at the end of the ring if more of its jobs wait.
  Every step is bounded, so the cost of a take does not grow with the number
  of groups. Without limits a take spends, beyond what moveToActive spends:
  the ring's pop, the job's leaving gs:waiting, and the group's next turn (or
  its forgetting); the takes that do not look around spend nothing on 'wait'
  and 'delayed'.
]]
local ADOPT_BATCH = 500
local RING_BATCH = 1000
-- Ids of jobs removed while they waited in a group, passed over in one take at most.
local STALE_BUDGET = 200
-- Rate-limited groups given a turn back per take at most.
local REVIEW_BATCH = 10

-- The queue's own state: whether it is paused or at its global concurrency,
-- and its rate limit (max, duration) as its meta sets it.
local function groupQueueState(G, K)
  local meta = rcall("HMGET", K.meta, "paused", "concurrency", "max", "duration", OWN_SETTINGS)
  G.own = meta[5] ~= false
  local held = meta[1] ~= false
  if not held and meta[2] and rcall("LLEN", K.active) >= tonumber(meta[2]) then
    held = true
  end
  return held, meta[3], meta[4]
end

local function groupPromoteDue(G, K)
  local due = rcall("ZRANGEBYSCORE", K.delayed, 0, (G.now + 1) * 0x1000 - 1, "LIMIT", 0, ADOPT_BATCH)
  if #due == 0 then return end
  rcall("ZREM", K.delayed, unpack(due))
  for _, jobId in ipairs(groupAdopt(G, due)) do
    rcall("HSET", G.prefix .. jobId, "delay", 0)
    rcall("XADD", K.events, "*", "event", "waiting", "jobId", jobId, "prev", "delayed")
  end
end

-- Up to ADOPT_BATCH jobs from the consuming (right) end of 'wait', oldest
-- first, read and cut in two commands.
local function groupAdoptWaiting(G, K)
  local ids = rcall("LRANGE", K.wait, -ADOPT_BATCH, -1)
  if #ids == 0 then return end
  rcall("LTRIM", K.wait, 0, -(#ids + 1))
  local jobs = {}
  for i = #ids, 1, -1 do
    -- BullMQ 4's markers in the wait list are not jobs.
    if string.sub(ids[i], 1, 2) ~= "0:" then jobs[#jobs + 1] = ids[i] end
  end
  if #jobs > 0 then groupAdopt(G, jobs) end
end

-- Up to ADOPT_BATCH jobs of BullMQ's 'prioritized', highest priority first:
-- where BullMQ puts a job with a priority it moves back (a retry, stalled-job
-- recovery) and a Node producer's job added with BullMQ's own priority. The
-- priority field is kept: the job keeps its place in its group.
local function groupAdoptPrioritized(G, K)
  local popped = rcall("ZPOPMIN", K.prioritized, ADOPT_BATCH)
  if #popped == 0 then return end
  local jobs = {}
  for i = 1, #popped, 2 do jobs[#jobs + 1] = popped[i] end
  groupAdopt(G, jobs)
end

-- Blocked groups that may start again get a turn; the pop looks at each again.
local function groupReview(G)
  local free = rcall("ZRANGEBYSCORE", G.ring, LIMITED, LIMITED + G.now, "LIMIT", 0, REVIEW_BATCH)
  for _, group in ipairs(free) do
    rcall("ZADD", G.ring, turnNow(G), group)
  end
  -- The pop gives back a full group's lost slots before it files it again.
  local stuck = rcall("ZRANGEBYSCORE", G.ring, FULL, FULL + G.now - G.lockDuration, "LIMIT", 0, 1)
  if #stuck > 0 then
    rcall("ZADD", G.ring, turnNow(G), stuck[1])
  end
end

-- The group's first job still waiting: its id, whether more wait, and its
-- fields (ids of jobs removed meanwhile are passed over, within the budget;
-- a job removed by our remove has left gs:waiting, one removed by another
-- client has no fields left).
local function groupPopJob(G, group)
  local waitKey = groupKey(G.prefix, group, "wait")
  while G.staleBudget > 0 do
    -- Two at once: a group's last job costs one command, and a second one
    -- (put back) tells that more wait.
    local popped = rcall("ZPOPMIN", waitKey, 2)
    if #popped == 0 then return nil, false end
    local more = #popped > 2
    if more then rcall("ZADD", waitKey, popped[4], popped[3]) end
    local jobId = popped[1]
    if rcall("ZREM", G.waiting, jobId) == 1 then
      local fields = rcall("HGETALL", G.prefix .. jobId)
      if #fields > 0 then return jobId, more, fields end
    end
    G.staleBudget = G.staleBudget - 1
    if not more then return nil, false end
  end
  return nil, true
end

-- Starts a job as BullMQ's moveToActive does (active list, rate limiter, lock,
-- "active" event, processedOn, attempts started), from the fields the pop read:
-- they are the reply, updated here rather than read again.
local function groupStart(G, K, jobId, fields, opts, maxJobs, limiterDuration)
  local jobKey = G.prefix .. jobId
  rcall("LPUSH", K.active, jobId)
  local at = {}
  for i = 1, #fields, 2 do at[fields[i]] = i end
  if maxJobs and not at["defa"] then
    if rcall("INCR", K.limiter) == 1 then
      rcall("PEXPIRE", K.limiter, math.floor(math.abs(tonumber(limiterDuration) or 0)))
    end
  end
  if opts["token"] ~= "0" then
    rcall("SET", jobKey .. ":lock", opts["token"], "PX", opts["lockDuration"])
  end
  local eventId = rcall("XADD", K.events, "*", "event", "active", "jobId", jobId, "prev", "waiting")
  local attempts = (at["ats"] and tonumber(fields[at["ats"] + 1]) or 0) + 1
  local function set(name, value)
    local i = at[name]
    if i then
      fields[i + 1] = value
    else
      fields[#fields + 1] = name
      fields[#fields + 1] = value
    end
  end
  set("ats", tostring(attempts))
  set("processedOn", G.nowText)
  if opts["name"] then
    set("pb", opts["name"])
    rcall("HSET", jobKey, "processedOn", G.nowText, "ats", attempts, "pb", opts["name"])
  else
    rcall("HSET", jobKey, "processedOn", G.nowText, "ats", attempts)
  end
  rcall("ZADD", K.marker, 0, "0")
  return { fields, jobId, 0, 0 }, eventId
end

-- After a start: the slot it takes, and the group's next place: the end of the
-- ring if more of its jobs wait and it can start one, its band if it cannot,
-- nowhere if nothing waits: forgotten unless it has slots or settings, where a
-- group that has just taken a slot is known to have one (it stays known; when
-- its last slot comes back, groupSlotFreed forgets it if it is idle then).
-- held and starts: what its limits' check read and counted (groupBlockedScore;
-- the start is in its rate window already). Only a start that may have filled
-- the last slot reads the slots again (the job's own slot may have been there
-- already).
local function groupStarted(G, group, jobId, token, more, settings, held, starts, eventId)
  local blocked = nil
  local holdsSlot = false
  if settings and settings.concurrency > 0 then
    local slotsKey = groupKey(G.prefix, group, "active")
    rcall("HSET", slotsKey, jobId, token)
    holdsSlot = true
    if more and held + 1 >= settings.concurrency
        and rcall("HLEN", slotsKey) >= settings.concurrency then
      blocked = FULL + G.now
    end
  end
  if more and not blocked and starts and starts >= settings.max then
    local ttl = starts == 1 and groupWindow(settings)
      or rcall("PTTL", groupKey(G.prefix, group, "limiter"))
    if ttl > 0 then blocked = LIMITED + G.now + ttl end
  end
  if more then
    rcall("ZADD", G.ring, blocked or turnOfEventId(eventId), group)
  elseif not holdsSlot then
    groupForgetIfIdle(G, group, true)
  end
end

-- Pops the ring until a group can start a job, and starts it: moveToActive's
-- reply, or nil when no group could.
local function groupTakeFromRing(G, K, opts, limited, maxJobs, limiterDuration)
  G.staleBudget = STALE_BUDGET
  for _ = 1, RING_BATCH do
    local popped = rcall("ZPOPMIN", G.ring)
    if #popped == 0 then break end
    local group = popped[1]
    local score = tonumber(popped[2])
    -- At a band, every group left can only wait: this one goes back. Without any
    -- limit a band below PAUSED (left by workers that had limits) is a turn.
    if score >= BLOCKED and (limited or score >= PAUSED) then
      rcall("ZADD", G.ring, popped[2], group)
      break
    end
    local settings = limited and groupSettings(G, group) or nil
    local blocked, held, starts = nil, nil, nil
    if settings then blocked, held, starts = groupBlockedScore(G, group, settings) end
    if blocked then
      rcall("ZADD", G.ring, blocked, group)
    else
      local jobId, more, fields = groupPopJob(G, group)
      if jobId then
        local reply, eventId = groupStart(G, K, jobId, fields, opts, maxJobs, limiterDuration)
        groupStarted(G, group, jobId, opts["token"], more, settings, held, starts, eventId)
        return reply
      else
        groupUncount(G, group, settings)
        if more then
          rcall("ZADD", G.ring, turnNow(G), group)
        else
          groupForgetIfIdle(G, group, true)
        end
      end
    end
    if G.staleBudget <= 0 then
      -- Passed over as many removed jobs as one take may: the next take goes on
      -- at once (the marker wakes a waiting worker) rather than after a pause.
      rcall("ZADD", K.marker, 0, "0")
      break
    end
  end
  return nil
end

-- Looks outside the ring: due delayed jobs and jobs in 'wait' are adopted (one
-- EXISTS tells whether there are any), and when a limit applies, blocked groups
-- that may start again get a turn. Returns whether that may have given the
-- ring anything.
local function groupLookAround(G, K, limited)
  local found = rcall("EXISTS", K.wait, K.delayed, K.prioritized) > 0
  if found then
    groupPromoteDue(G, K)
    groupAdoptWaiting(G, K)
    groupAdoptPrioritized(G, K)
  end
  if limited then groupReview(G) end
  return found or limited
end

-- One take. giving: the id of the job whose attempt the caller just finished
-- (its group givingGroup), whose slot is given back; fetch: whether to take a
-- job at all; lookAround: whether to look outside the ring first. A worker asks
-- for that on one take in a few (every command counts, a take being a few
-- dozen of them), and a take whose ring has nothing looks anyway, so a job in
-- 'wait' or a due delayed one waits a few takes at most.
-- Returns moveToActive's reply, or nil when no job was taken.
local function groupFetch(G, K, opts, fetch, givingGroup, giving, lookAround)
  local held, metaMax, metaDuration = groupQueueState(G, K)
  local turned = giving and groupGiveBack(G, givingGroup, giving, opts["token"])
  if not fetch then
    -- A worker closing (or over its concurrency) takes nothing: the group its
    -- slot let go on is another worker's to start, woken as by an add.
    if turned and not held then rcall("ZADD", K.marker, 0, "0") end
    return nil
  end
  -- A paused (or globally maxed) queue's jobs stay where they are.
  if held then return { 0, 0, 0, 0 } end
  local limited = groupLimited(G)
  if lookAround then groupLookAround(G, K, limited) end
  local maxJobs = tonumber(metaMax or (opts["limiter"] and opts["limiter"]["max"]))
  local limiterDuration = (opts["limiter"] and opts["limiter"]["duration"]) or metaDuration
  if maxJobs and maxJobs <= (tonumber(rcall("GET", K.limiter)) or 0) then
    local ttl = rcall("PTTL", K.limiter)
    if ttl > 0 then return { 0, 0, ttl, 0 } end
    if ttl == 0 then rcall("DEL", K.limiter) end
  end
  local reply = groupTakeFromRing(G, K, opts, limited, maxJobs, limiterDuration)
  if reply or lookAround then return reply end
  if groupLookAround(G, K, limited) then
    return groupTakeFromRing(G, K, opts, limited, maxJobs, limiterDuration)
  end
  return nil
end

-- When a worker that found nothing should look again: the next delayed job,
-- the first group whose rate window ends, or when the group at its concurrency
-- the longest is looked at for lost slots. nil: nothing to wait for.
local function groupNextWake(G, K)
  local wake = nil
  local function consider(at)
    if wake == nil or at < wake then wake = at end
  end
  local delayed = rcall("ZRANGE", K.delayed, 0, 0, "WITHSCORES")
  if #delayed > 0 then consider(math.floor(tonumber(delayed[2]) / 0x1000)) end
  if groupLimited(G) then
    -- A band ends where the next one starts ("(": exclusive).
    local limited = rcall("ZRANGEBYSCORE", G.ring, LIMITED, string.format("(%.0f", PAUSED),
      "WITHSCORES", "LIMIT", 0, 1)
    if #limited > 0 then consider(tonumber(limited[2]) - LIMITED) end
    local full = rcall("ZRANGEBYSCORE", G.ring, FULL, string.format("(%.0f", LIMITED),
      "WITHSCORES", "LIMIT", 0, 1)
    if #full > 0 then consider(tonumber(full[2]) - FULL + G.lockDuration) end
  end
  return wake
end
