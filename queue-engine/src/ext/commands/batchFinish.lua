--[[
  Batches (change 36): the completion of a batch's jobs in one call (our
  script). scripts.rs puts BullMQ's moveToFinished in front of this text, cut
  before its body, so that its helpers (the retention of finished jobs, the
  events' trim, the metrics) are the ones used here.

  The worker sends only jobs whose completion is moveToFinished's plain path:
  completed, no parent, no deduplication id; one call per retention among
  them (ARGV[4]'s keepJobs). Every other outcome of a batch (a failure, a
  retry, a flow's child) goes through BullMQ's own scripts one job at a time.

  Per job it costs 3 commands (LREM, HSET, XADD) where moveToFinished's
  completion costs 16; the locks' check and release, the finished set, the
  retention, the metrics and the drained check are once per batch. attemptsMade
  is written from the worker's count (the job is locked: nothing else writes
  it) instead of an HINCRBY.

  Input:
    KEYS[1] active         KEYS[5] meta
    KEYS[2] events         KEYS[6] metrics (completed)
    KEYS[3] stalled        KEYS[7] wait
    KEYS[4] completed      KEYS[8] prioritized
    ARGV[1] key prefix
    ARGV[2] timestamp
    ARGV[3] the batch's lock token
    ARGV[4] msgpacked { keepJobs, maxMetricsSize }, as moveToFinished's opts
    ARGV[5..] per job, three: job id, return value (JSON), attemptsMade after it
  Output: one code per job, in order: 0 completed, or moveToFinished's code
    (-2 lock missing, -6 lock not owned, -3 not active, -4 pending children,
    -9 failed children, -1 no such job) for a job this call left where it was. The
    worker sends each job id once.
]]
local prefix, timestamp, token = ARGV[1], ARGV[2], ARGV[3]
local opts = cmsgpack.unpack(ARGV[4])
local count = (#ARGV - 4) / 3
local ids, values, made, lockKeys = {}, {}, {}, {}
for i = 1, count do
  local at = 4 + (i - 1) * 3
  ids[i], values[i], made[i] = ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  lockKeys[i] = prefix .. ids[i] .. ':lock'
end
local codes = {}
local locks = token ~= "0" and rcall("MGET", unpack(lockKeys)) or {}
-- A job with children pending or failed is not completed (moveToFinished's
-- -4 and -9): one EXISTS for the batch, the sets read only when it says so.
local childKeys = {}
for i = 1, count do
  childKeys[#childKeys + 1] = prefix .. ids[i] .. ':dependencies'
  childKeys[#childKeys + 1] = prefix .. ids[i] .. ':unsuccessful'
end
local anyChildren = rcall("EXISTS", unpack(childKeys)) > 0
-- A job removed while locked is moveToFinished's -1: one EXISTS for the batch, each
-- job's asked only when it says one is missing.
local jobKeys = {}
for i = 1, count do
  jobKeys[i] = prefix .. ids[i]
end
local allThere = rcall("EXISTS", unpack(jobKeys)) == count
local owned, ownedLocks = {}, {}
for i = 1, count do
  local jobKey = jobKeys[i]
  if not allThere and rcall("EXISTS", jobKey) == 0 then
    codes[i] = -1
  elseif token ~= "0" and locks[i] ~= token then
    codes[i] = locks[i] and -6 or -2
  elseif anyChildren and rcall("SCARD", jobKey .. ':dependencies') ~= 0 then
    codes[i] = -4
  elseif anyChildren and rcall("ZCARD", jobKey .. ':unsuccessful') ~= 0 then
    codes[i] = -9
  else
    codes[i] = 0
    owned[#owned + 1] = i
    ownedLocks[#ownedLocks + 1] = lockKeys[i]
  end
end
if #owned == 0 then
  return codes
end
if token ~= "0" then
  rcall("DEL", unpack(ownedLocks))
end
local ownedIds = {}
for n, i in ipairs(owned) do
  ownedIds[n] = ids[i]
end
rcall("SREM", KEYS[3], unpack(ownedIds))
-- As moveToFinished: trimmed before this call's events are written.
trimEvents(KEYS[5], KEYS[2])
local keep = opts['keepJobs']
local maxCount, maxAge, maxLimit = keep['count'], keep['age'], keep['limit'] or 1000
local scored, done = {}, 0
for _, i in ipairs(owned) do
  local jobId = ids[i]
  if rcall("LREM", KEYS[1], -1, jobId) < 1 then
    codes[i] = -3
  else
    local jobKey = prefix .. jobId
    if maxCount ~= 0 then
      scored[#scored + 1] = timestamp
      scored[#scored + 1] = jobId
      rcall("HSET", jobKey, "returnvalue", values[i], "finishedOn", timestamp, "atm", made[i])
    else
      removeJobKeys(jobKey)
    end
    rcall("XADD", KEYS[2], "*", "event", "completed", "jobId", jobId, "returnvalue", values[i],
      "prev", "active")
    done = done + 1
  end
end
if #scored > 0 then
  rcall("ZADD", KEYS[4], unpack(scored))
  if maxAge ~= nil then
    removeJobsByMaxAge(timestamp, maxAge, KEYS[4], prefix, maxLimit)
  end
  if maxCount ~= nil and maxCount > 0 then
    removeJobsByMaxCount(maxCount, KEYS[4], prefix)
  end
end
local maxMetricsSize = opts['maxMetricsSize']
if done > 0 and maxMetricsSize ~= "" then
  -- collectMetrics counts one job, in the minute it closes the last one with; the
  -- rest of the batch counts in the same minute, after it.
  collectMetrics(KEYS[6], KEYS[6] .. ':data', maxMetricsSize, timestamp)
  if done > 1 then
    rcall("HINCRBY", KEYS[6], "count", done - 1)
  end
end
if rcall("LLEN", KEYS[7]) == 0 and rcall("LLEN", KEYS[1]) == 0 and rcall("ZCARD", KEYS[8]) == 0 then
  rcall("XADD", KEYS[2], "*", "event", "drained")
end
return codes
