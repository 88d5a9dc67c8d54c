--[[
  Fair groups: a grouped worker's fetch (our script, beside BullMQ's
  moveToActive; groupFetch.lua says what a take does, groupCommon.lua the
  layout). Answers as moveToActive does. Also gives back the slot of an
  attempt that ended without groupFinish (a retry, a worker closing), with or
  without taking the next job.

  Input:
    KEYS[1..11] moveToActive's: wait, active, prioritized, events, stalled,
                rate limiter, delayed, paused, meta, pc, marker
    KEYS[12] the ring (gs:turns)
    KEYS[13] known groups
    KEYS[14] grouped jobs waiting (gs:waiting)
    KEYS[15] BullMQ's job counter ('id')
    ARGV[1] key prefix
    ARGV[2] timestamp
    ARGV[3] opts (msgpack: token, lockDuration, name, limiter), as moveToActive
    ARGV[4] group concurrency (0: none)
    ARGV[5] group rate limit: starts per window (0: none)
    ARGV[6] group rate limit: window (ms)
    ARGV[7] "1" to take a job, "0" to give a slot back only
    ARGV[8] group of the slot to give back
    ARGV[9] its job id ("" for none; the lock token is opts' token)
    ARGV[10] "1" to look outside the ring first (groupFetch.lua)
]]
local opts = cmsgpack.unpack(ARGV[3])
local G = groupContext({ ARGV[1], KEYS[12], KEYS[13], KEYS[14], KEYS[15] },
  { ARGV[4], ARGV[5], ARGV[6] }, tonumber(ARGV[2]), tonumber(opts["lockDuration"]))
G.nowText = ARGV[2]
local K = { wait = KEYS[1], active = KEYS[2], prioritized = KEYS[3], events = KEYS[4],
  limiter = KEYS[6], delayed = KEYS[7], meta = KEYS[9], marker = KEYS[11] }
local giving = ARGV[9] ~= "" and ARGV[9] or nil
local reply = groupFetch(G, K, opts, ARGV[7] == "1", ARGV[8], giving, ARGV[10] == "1")
if reply then return reply end
return { 0, 0, 0, groupNextWake(G, K) or 0 }
