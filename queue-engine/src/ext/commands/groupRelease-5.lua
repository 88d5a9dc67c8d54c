--[[
  Fair groups: a job's attempt is over; give back its group's slot (our
  script; see groupCommon.lua). The slot is given back only by the run that
  holds it (the same lock token): a run that lost its lock to another leaves
  the new run's slot alone. The group rejoins the ring if it can start a job.

  Input:
    KEYS[1] group ring
    KEYS[2] known groups
    KEYS[3] rate-limited groups
    KEYS[4] full groups
    KEYS[5] marker key
    ARGV[1] key prefix
    ARGV[2] group
    ARGV[3] job id
    ARGV[4] lock token of the run
    ARGV[5] timestamp
    ARGV[6] group concurrency (0: none)
    ARGV[7] group rate limit: starts per window (0: none)
    ARGV[8] group rate limit: window (ms)
  Output:
    1 if the slot was given back, 0 if this run held none
]]
local prefix = ARGV[1]
local group = ARGV[2]
local activeKey = groupKey(prefix, group, "active")
local released = 0
if rcall("HGET", activeKey, ARGV[3]) == ARGV[4] then
  rcall("HDEL", activeKey, ARGV[3])
  released = 1
end
local defaults = { tonumber(ARGV[6]) or 0, tonumber(ARGV[7]) or 0, tonumber(ARGV[8]) or 0 }
local inRing, block = groupRejoin(prefix, group, defaults, KEYS[1], KEYS[3], KEYS[4], KEYS[5], tonumber(ARGV[5]))
if not inRing then
  groupForgetIfIdle(prefix, group, KEYS[2], block == "empty")
end
return released
