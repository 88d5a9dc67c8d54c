-- KEYS[1]: a queue's wait list; KEYS[2]: its grouped jobs waiting their turn
-- (gs:waiting, by arrival: change 34). ARGV[1]: the job key base. The timestamp
-- of the job that has waited longest (the list's tail, or the first grouped job),
-- or false.
local oldest = false
local function consider(id)
  if not id then return end
  local timestamp = tonumber(redis.call("HGET", ARGV[1] .. id, "timestamp"))
  if timestamp and (not oldest or timestamp < oldest) then oldest = timestamp end
end
consider(redis.call("LINDEX", KEYS[1], -1))
consider(redis.call("ZRANGE", KEYS[2], 0, 0)[1])
if not oldest then return false end
return string.format("%d", oldest)
