--[[
  Batches (change 36): a batch worker's take of up to ARGV[4] jobs in one call
  (our script). scripts.rs puts BullMQ's moveToActive in front of this text,
  cut where it takes its one job: its checks run as they are (delayed jobs
  promoted, the rate limit's window, a paused or maxed queue), and this part
  takes many jobs the way moveToActive takes one: from the right of `wait`
  first, then the lowest scores of `prioritized`; each job locked with the
  fetch's token, its "active" event, processedOn and attemptsStarted written.

  Per job it costs 4 commands (HGETALL, HSET, SET, XADD) where moveToActive
  costs 8; the list moves, the rate limit's count and the marker are once per
  batch.

  Input: moveToActive's (KEYS[1..11], ARGV[1..3]), and:
    ARGV[4] the most jobs to take
    ARGV[5] the fewest: when the window, the queue's concurrency or the jobs
            waiting leave fewer, none is taken (0: any number). A batch that ends
            takes the next only when it is full, so that it never waits to fill.
  Output: { job ids, their HGETALL replies packed by cmsgpack (an array of
    one array per job), 0, 0 } when jobs were taken; moveToActive's { 0, 0,
    rate limit ttl, next delayed timestamp } when none. Packed, a batch's
    hashes are one string to send and to read instead of thousands: reading
    them one by one was a quarter of the worker's time.
]]
local want = tonumber(ARGV[4])
local limiterDuration = (opts['limiter'] and opts['limiter']['duration']) or rateLimitDuration
-- A batch counts its jobs against the rate limit: no more than the window has left.
if maxJobs then
  want = math.min(want, maxJobs - tonumber(rcall("GET", rateLimiterKey) or 0))
end
-- Nor more than the queue's global concurrency leaves (getQueueMetadata only
-- said whether it is reached).
local globalConcurrency = tonumber(rcall("HGET", KEYS[9], "concurrency"))
if globalConcurrency then
  want = math.min(want, globalConcurrency - rcall("LLEN", activeKey))
end
local least = tonumber(ARGV[5]) or 0
if least > 0 and (want < least or
    rcall("LLEN", waitKey) + rcall("ZCARD", KEYS[3]) < least) then
  want = 0
end
local ids = {}
if want > 0 then
  local tail = rcall("LRANGE", waitKey, -want, -1)
  if #tail > 0 then
    rcall("LTRIM", waitKey, 0, -(#tail + 1))
    -- The rightmost first, as RPOPLPUSH takes them; v4's markers are dropped.
    for i = #tail, 1, -1 do
      if string.sub(tail[i], 1, 2) ~= "0:" then
        ids[#ids + 1] = tail[i]
      end
    end
  end
  if #ids < want then
    local asked = want - #ids
    local popped = rcall("ZPOPMIN", KEYS[3], asked)
    for i = 1, #popped, 2 do
      ids[#ids + 1] = popped[i]
    end
    -- As moveJobFromPrioritizedToActive: no prioritized job left, no counter.
    if #popped < asked * 2 then
      rcall("DEL", KEYS[10])
    end
  end
end
if #ids == 0 then
  return {0, 0, 0, getNextDelayedTimestamp(delayedKey) or 0}
end
-- LPUSH of a list pushes its items one after the other, as RPOPLPUSH would.
rcall("LPUSH", activeKey, unpack(ids))
local taken, replies, counted = {}, {}, 0
local token, lockDuration, worker = opts['token'], opts['lockDuration'], opts['name']
for _, jobId in ipairs(ids) do
  local jobKey = ARGV[1] .. jobId
  local fields = rcall("HGETALL", jobKey)
  if #fields == 0 then
    -- Removed while it waited: nothing to run.
    rcall("LREM", activeKey, 1, jobId)
  else
    local started, deferred = 0, false
    local at = {}
    for f = 1, #fields, 2 do
      local name = fields[f]
      if name == "ats" then
        started = tonumber(fields[f + 1]) or 0
        at.ats = f + 1
      elseif name == "processedOn" then
        at.processedOn = f + 1
      elseif name == "pb" then
        at.pb = f + 1
      elseif name == "defa" then
        deferred = true
      end
    end
    local written = {"processedOn", ARGV[2], "ats", started + 1}
    if worker then
      written[5] = "pb"
      written[6] = worker
    end
    rcall("HSET", jobKey, unpack(written))
    -- The reply says what the job holds now, as moveToActive's HGETALL after its writes.
    for w = 1, #written, 2 do
      local place = at[written[w]]
      if place then
        fields[place] = tostring(written[w + 1])
      else
        fields[#fields + 1] = written[w]
        fields[#fields + 1] = tostring(written[w + 1])
      end
    end
    if token ~= "0" then
      rcall("SET", jobKey .. ':lock', token, "PX", lockDuration)
    end
    rcall("XADD", eventStreamKey, "*", "event", "active", "jobId", jobId, "prev", "waiting")
    -- As prepareJobForProcessing: a deferred failure does not count for the limit.
    if not deferred then
      counted = counted + 1
    end
    taken[#taken + 1] = jobId
    replies[#replies + 1] = fields
  end
end
if maxJobs and counted > 0 then
  if tonumber(rcall("INCRBY", rateLimiterKey, counted)) == counted then
    rcall("PEXPIRE", rateLimiterKey, math.floor(math.abs(limiterDuration)))
  end
end
-- As moveToActive: a job taken leaves the marker for the next worker to look.
addBaseMarkerIfNeeded(markerKey, false)
if #taken == 0 then
  return {0, 0, 0, getNextDelayedTimestamp(delayedKey) or 0}
end
return {taken, cmsgpack.pack(replies), 0, 0}
