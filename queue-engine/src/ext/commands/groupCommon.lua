--[[
  Fair groups: the layout and the helpers every group script shares (this file
  is put in front of each of them by scripts.rs).

  A grouped job is a BullMQ job whose options name its group:
  opts.group = { id = "tenant-42" } (optionally opts.group.priority). While it
  waits its turn it lives in its group, outside BullMQ's wait list and
  prioritized set, as BullMQ Pro keeps grouped jobs: our producers add it
  straight there (groupAdd); a job a Node producer adds, a retried, stalled or
  due delayed one reaches BullMQ's 'wait' (or 'delayed') and the next take
  moves it into its group ("adopts" it). Once taken it is an ordinary BullMQ
  job again: 'active' under BullMQ's lock, then 'completed' or 'failed'.

  Keys (P is the queue's key prefix, "bull:<queue>:"; no job key has this
  shape, job ids having no ':'):
    P.."gs:turns"    ZSET  the ring: groups with jobs waiting, by turn. A take
                           pops the lowest; a group joins with ZADD NX. Scores
                           below BLOCKED are turns; at or above, the group
                           waits out a limit or a pause (see the bands below)
    P.."gs:known"    ZSET  groups with jobs waiting, slots held or settings,
                           all at score 0 (ordered by name, for paging)
    P.."gs:waiting"  ZSET  every grouped job waiting its turn, by arrival: the
                           queue's count, listing and state of them
    P.."g:"..id..":wait"    ZSET  the group's waiting jobs, by priority then arrival
    P.."g:"..id..":active"  HASH  job id -> lock token of each slot held (only
                                  while a concurrency limit applies)
    P.."g:"..id..":meta"    HASH  paused, concurrency, max, duration: the group's
                                  own settings
    P.."g:"..id..":limiter" STRING starts in the current rate window (a take
                                   counts its start here as it checks the
                                   limit, and takes the count back if it
                                   starts nothing)
  The queue's meta hash (BullMQ's) gets one field of ours, "groups:own", once
  any group has settings of its own: until then a take reads no group's meta.

  Turns are Redis's clock: (ms - TURN_EPOCH) * 1024 + a sequence within the
  millisecond, taken from the id of an event the script writes anyway (the
  job's "waiting" or "active" event), else from TIME and past the ring's last
  turn (turnNow). A group that goes on gets the turn of its job's "active"
  event, later than every turn given before: it goes to the end of the ring.

  Bands of gs:turns (doubles hold integers exactly below 2^53):
    [0, BLOCKED)              a turn: the group can start a job
    FULL + ms                 at its concurrency since ms
    LIMITED + ms              at its rate limit until ms
    PAUSED                    paused
  A blocked group stays in the ring so that an add's ZADD NX leaves it where it
  is; a take that pops a blocked score has popped past every group that can
  start, puts it back and stops.
]]
local rcall = redis.call

local BLOCKED = 2 ^ 51
local FULL = 2 ^ 51
local LIMITED = 2 ^ 52
local PAUSED = 2 ^ 53
local TURN_EPOCH = 1704067200000
local OWN_SETTINGS = "groups:own"

local function groupKey(prefix, group, suffix)
  return prefix .. "g:" .. group .. ":" .. suffix
end

-- The group of a job, from its stored (JSON) options: its id ("" for a job
-- without one) and its priority inside the group, if any.
local function groupOfOpts(optsJson)
  if not optsJson then return "", nil end
  local ok, opts = pcall(cjson.decode, optsJson)
  if ok and type(opts) == "table" and type(opts["group"]) == "table" then
    local id = opts["group"]["id"]
    -- A Node producer may give a number: the group is its decimal text.
    if type(id) == "number" then id = string.format("%d", id) end
    if type(id) == "string" and id ~= "" then
      return id, tonumber(opts["group"]["priority"])
    end
  end
  return "", nil
end

-- A job's place in its group: by priority (none first), then by arrival.
local function groupScore(priority, order)
  return (priority or 0) * 0x100000000 + order % 0x100000000
end

-- The turn of an event's stream id "ms-seq".
local function turnOfEventId(id)
  local dash = string.find(id, "-", 1, true)
  -- Not clamped: while Redis's clock stands still (stepped back), the sequence
  -- grows past 1023 and the turns still grow, rather than all being equal.
  local seq = tonumber(string.sub(id, dash + 1))
  return (tonumber(string.sub(id, 1, dash - 1)) - TURN_EPOCH) * 1024 + seq
end

-- What a script call shares: its keys, the workers' limits for every group,
-- and what it learned (whether groups have settings; Redis's time once read).
-- keys: { prefix, ring, known, waiting, order } (order: BullMQ's job counter,
-- whose numbers order the jobs a take adopts).
local function groupContext(keys, defaults, now, lockDuration)
  return {
    prefix = keys[1], ring = keys[2], known = keys[3], waiting = keys[4], order = keys[5],
    concurrency = tonumber(defaults[1]) or 0,
    max = tonumber(defaults[2]) or 0,
    duration = tonumber(defaults[3]) or 0,
    now = now,
    lockDuration = lockDuration or 30000,
    own = false,
  }
end

-- A turn now: after every turn the ring holds (its last one read once per call,
-- then one more each time), so that a group given a turn in the millisecond other
-- groups got theirs, by this script or another, goes after them, not by its name.
local function turnNow(G)
  if G.turn then
    G.turn = G.turn + 1
    return G.turn
  end
  local t = rcall("TIME")
  local now = (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - TURN_EPOCH) * 1024
  local last = rcall("ZREVRANGEBYSCORE", G.ring, string.format("(%.0f", BLOCKED), "-inf",
    "WITHSCORES", "LIMIT", 0, 1)
  if #last > 0 and tonumber(last[2]) >= now then now = tonumber(last[2]) + 1 end
  G.turn = now
  return G.turn
end

-- Whether any limit can apply to a group: the workers' or a group's own.
local function groupLimited(G)
  return G.own or G.concurrency > 0 or G.max > 0
end

-- A group's limits and pause, its own settings winning over the workers'.
local function groupSettings(G, group)
  if not G.own then
    return { paused = false, concurrency = G.concurrency, max = G.max, duration = G.duration }
  end
  local meta = rcall("HMGET", groupKey(G.prefix, group, "meta"), "paused", "concurrency", "max", "duration")
  return {
    paused = meta[1] ~= false,
    concurrency = tonumber(meta[2]) or G.concurrency,
    max = tonumber(meta[3]) or G.max,
    duration = tonumber(meta[4]) or G.duration,
  }
end

-- Gives back the group's slots whose lock is gone (a worker died, or a run
-- ended without giving its slot back): bounded by the group's concurrency.
local function groupDropLostSlots(G, group)
  local slotsKey = groupKey(G.prefix, group, "active")
  local slots = rcall("HGETALL", slotsKey)
  for i = 1, #slots, 2 do
    if rcall("GET", G.prefix .. slots[i] .. ":lock") ~= slots[i + 1] then
      rcall("HDEL", slotsKey, slots[i])
    end
  end
end

-- A group's rate window in ms: at least 1, as PEXPIRE of 0 would delete the
-- counter at once.
local function groupWindow(settings)
  return math.max(1, math.floor(settings.duration))
end

-- The score a group that cannot start a job now waits at, or nil if it can; and
-- the slots it holds (when it has a concurrency limit) and the starts counted in
-- its rate window with this one (when it has a rate limit). A group found at its
-- concurrency first gives back the slots whose lock is gone. Under a rate limit
-- the check is the count itself: the start it allows is counted in its window
-- already (one INCR where a GET and an INCR were two); a group found at its limit
-- takes its count back (INCR, PTTL, DECR where GET and PTTL were two: one command
-- more a refusal, one less a start). So this writes: a caller that gets nil
-- either starts a job (groupStarted) or gives the start back (groupUncount), and
-- the counter holds the window's starts, no more.
local function groupBlockedScore(G, group, settings)
  if settings.paused then return PAUSED end
  local held = nil
  if settings.concurrency > 0 then
    local slotsKey = groupKey(G.prefix, group, "active")
    held = rcall("HLEN", slotsKey)
    if held >= settings.concurrency then
      groupDropLostSlots(G, group)
      held = rcall("HLEN", slotsKey)
    end
    if held >= settings.concurrency then return FULL + G.now end
  end
  local starts = nil
  if settings.max > 0 then
    local limiterKey = groupKey(G.prefix, group, "limiter")
    local window = groupWindow(settings)
    starts = rcall("INCR", limiterKey)
    if starts == 1 then
      rcall("PEXPIRE", limiterKey, window)
    elseif starts > settings.max then
      local ttl = rcall("PTTL", limiterKey)
      if ttl > 0 then
        rcall("DECR", limiterKey)
        return LIMITED + G.now + ttl
      end
      -- The window's last millisecond (0), or a counter without an end (-1,
      -- which these scripts never leave; another client's SET could): this
      -- start opens a new window.
      rcall("SET", limiterKey, 1, "PX", window)
      starts = 1
    end
  end
  return nil, held, starts
end

-- Gives back the start groupBlockedScore counted for a group that then started
-- nothing: every job it held had been deleted, or the take passed over as many
-- deleted jobs as one take may (groupPopJob).
local function groupUncount(G, group, settings)
  if settings and settings.max > 0 then
    rcall("DECR", groupKey(G.prefix, group, "limiter"))
  end
end

-- A group with jobs waiting joins the ring, at the end, unless it is there
-- (blocked groups included). A group new to the ring becomes known.
local function groupJoin(G, group, turn)
  if rcall("ZADD", G.ring, "NX", turn, group) == 1 then
    rcall("ZADD", G.known, 0, group)
  end
end

-- Forgets a group out of the ring that holds no slot and has no settings.
-- outOfRing: the caller knows the group is not in the ring (it just popped it);
-- else a group still in the ring (at a band, or with a removed job's turn) is
-- kept, so that a group in the ring is always known. A group out of the ring has
-- nothing waiting: every script that puts a job in a group puts the group in the
-- ring (groupJoin), and a take that pops a group puts it back if jobs remain.
local function groupForgetIfIdle(G, group, outOfRing)
  if not outOfRing and rcall("ZSCORE", G.ring, group) then return end
  if groupLimited(G)
      and rcall("EXISTS", groupKey(G.prefix, group, "active"), groupKey(G.prefix, group, "meta")) > 0 then
    return
  end
  rcall("ZREM", G.known, group)
end

-- Puts one job in its group's waiting set. order: its arrival number, from
-- BullMQ's job counter.
local function groupFile(G, jobId, group, priority, order)
  rcall("ZADD", groupKey(G.prefix, group, "wait"), groupScore(priority, order), jobId)
  -- A priority inside the group is the job's priority, where Bull Board reads it.
  if priority and priority > 0 then rcall("HSET", G.prefix .. jobId, "priority", priority) end
end

-- Moves one job into its group (a producer's add): its group's set, the set of
-- grouped jobs waiting, and the ring.
local function groupEnqueue(G, jobId, group, priority, order, turn)
  groupFile(G, jobId, group, priority, order)
  rcall("ZADD", G.waiting, order, jobId)
  groupJoin(G, group, turn)
end

-- A slot of the group was given back: a group that waited at its concurrency
-- gets a turn (the take that pops it looks again, and files it back if it must
-- still wait); an idle one is forgotten. Returns whether it gave a turn.
local function groupSlotFreed(G, group)
  local score = tonumber(rcall("ZSCORE", G.ring, group))
  if score == nil then
    groupForgetIfIdle(G, group, true)
  elseif score >= FULL and score < LIMITED then
    rcall("ZADD", G.ring, turnNow(G), group)
    return true
  end
  return false
end

-- Gives back the slot a run of jobId held (only the run whose lock token holds
-- it): a group that waited at its concurrency can start again. G.lockChecked:
-- the caller's script has just found that the run holds the job's lock
-- (moveToFinished's removeLock), so the slot, which each start of the job
-- writes, is this run's: it is dropped without reading it first. Returns
-- whether the group got a turn.
local function groupGiveBack(G, group, jobId, token)
  if not (G.own or G.concurrency > 0) then return false end
  local slotsKey = groupKey(G.prefix, group, "active")
  if G.lockChecked then
    if rcall("HDEL", slotsKey, jobId) == 0 then return false end
  else
    if rcall("HGET", slotsKey, jobId) ~= token then return false end
    rcall("HDEL", slotsKey, jobId)
  end
  return groupSlotFreed(G, group)
end

-- Adopts a batch of jobs from BullMQ's sets (at most ADOPT_BATCH, groupFetch.lua):
-- numbers them in one INCRBY of the job counter and puts each in its group; then,
-- one command each for the whole batch rather than one a job, adds them to the set
-- of grouped jobs waiting, their groups to the ring (each at the end, in the order
-- of its first job, unless it is there) and to the known groups (a group in the
-- ring is known; one known already stays as it is). A job that started before
-- (stalled, retried) then gives back the slot it held.
local function groupAdopt(G, ids)
  local first = rcall("INCRBY", G.order, #ids) - #ids + 1
  local adopted, waiting, turns, names, seen, startedBefore = {}, {}, {}, {}, {}, {}
  for i, jobId in ipairs(ids) do
    local fields = rcall("HMGET", G.prefix .. jobId, "opts", "priority", "ats")
    if fields[1] then
      local group, groupPriority = groupOfOpts(fields[1])
      local order = first + i - 1
      groupFile(G, jobId, group, groupPriority or tonumber(fields[2]), order)
      waiting[#waiting + 1] = order
      waiting[#waiting + 1] = jobId
      if not seen[group] then
        seen[group] = true
        turns[#turns + 1] = turnNow(G)
        turns[#turns + 1] = group
        names[#names + 1] = 0
        names[#names + 1] = group
      end
      if (tonumber(fields[3]) or 0) > 0 then
        startedBefore[#startedBefore + 1] = { jobId, group }
      end
      adopted[#adopted + 1] = jobId
    end
  end
  if #adopted == 0 then return adopted end
  rcall("ZADD", G.waiting, unpack(waiting))
  rcall("ZADD", G.ring, "NX", unpack(turns))
  rcall("ZADD", G.known, unpack(names))
  if G.own or G.concurrency > 0 then
    for _, job in ipairs(startedBefore) do
      if rcall("HDEL", groupKey(G.prefix, job[2], "active"), job[1]) == 1 then
        groupSlotFreed(G, job[2])
      end
    end
  end
  return adopted
end
