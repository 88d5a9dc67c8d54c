--[[
  Fair groups: one script per finished grouped job (our script). It is
  BullMQ's moveToFinished, unchanged, but for its fetch of the next job, which
  is this take by group: scripts.rs puts groupCommon.lua, groupFetch.lua and
  this file in front of moveToFinished's text and makes its fetchNextJob call
  groupFetchNext. So finishing the job, giving back its group's slot and
  taking the next job of the next group are one call.

  Input: moveToFinished's (KEYS[1..14], ARGV[1..9]; ARGV[6], its "fetch
  next", is always "1" so that this function runs once the job is finished),
  and:
    KEYS[15] the ring (gs:turns)
    KEYS[16] known groups
    KEYS[17] grouped jobs waiting (gs:waiting)
    KEYS[18] BullMQ's job counter ('id')
    ARGV[10] group concurrency (0: none)
    ARGV[11] group rate limit: starts per window (0: none)
    ARGV[12] group rate limit: window (ms)
    ARGV[13] group of the finished job
    ARGV[14] "1" to take the next job (the worker's own "fetch next")
    ARGV[15] "1" to look outside the ring first (groupFetch.lua)
  Output: moveToFinished's.
]]
local function groupFetchNext(waitKey, activeKey, prioritizedKey, eventStreamKey,
    rateLimiterKey, delayedKey, metaKey, _pcKey, markerKey, prefix, timestamp, opts)
  local G = groupContext({ prefix, KEYS[15], KEYS[16], KEYS[17], KEYS[18] },
    { ARGV[10], ARGV[11], ARGV[12] }, tonumber(timestamp), tonumber(opts["lockDuration"]))
  G.nowText = timestamp
  -- moveToFinished checked the run's lock before this (removeLock) unless it has none.
  G.lockChecked = opts["token"] ~= "0"
  local K = { wait = waitKey, active = activeKey, prioritized = prioritizedKey,
    events = eventStreamKey, limiter = rateLimiterKey, delayed = delayedKey, meta = metaKey,
    marker = markerKey }
  local fetch = ARGV[14] == "1"
  local reply = groupFetch(G, K, opts, fetch, ARGV[13], ARGV[1], ARGV[15] == "1")
  if reply then return reply end
  -- Nothing taken: "drained" (moveToFinished's check, on nil) only once no
  -- grouped job waits either.
  if rcall("ZCARD", G.waiting) == 0 then return nil end
  return { 0, 0, 0, fetch and groupNextWake(G, K) or 0 }
end
