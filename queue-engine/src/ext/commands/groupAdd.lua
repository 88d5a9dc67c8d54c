--[[
  Fair groups: our producers' add puts a grouped job straight into its group
  (our script). It is BullMQ's addStandardJob, unchanged, but for where the
  job goes: scripts.rs puts groupCommon.lua and this file in front of its
  text and makes it call groupAdded instead of pushing the job on 'wait'. The
  job is stored, deduplicated and announced ("added", "waiting") as BullMQ
  does; its arrival number is the job counter addStandardJob takes anyway,
  and its group's turn (if the group joins the ring) that of its "waiting"
  event.

  Input: addStandardJob's (KEYS[1..9], ARGV[1..3]), and:
    KEYS[10] the ring (gs:turns)
    KEYS[11] known groups
    KEYS[12] grouped jobs waiting (gs:waiting)
]]
local function groupAdded(prefix, jobId, order, opts, waitingEventId)
  local G = groupContext({ prefix, KEYS[10], KEYS[11], KEYS[12], KEYS[4] }, { 0, 0, 0 }, 0)
  local group, priority = "", nil
  local spec = opts["group"]
  if type(spec) == "table" then
    local id = spec["id"]
    if type(id) == "number" then id = string.format("%d", id) end
    if type(id) == "string" then group = id end
    priority = tonumber(spec["priority"])
  end
  groupEnqueue(G, jobId, group, priority, order, turnOfEventId(waitingEventId))
  -- Wakes a worker blocked on the marker, as BullMQ's add does.
  rcall("ZADD", KEYS[9], 0, "0")
end
