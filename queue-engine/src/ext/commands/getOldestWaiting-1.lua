-- KEYS[1]: a queue's wait list. ARGV[1]: the job key base. The timestamp of the job
-- that has waited longest (the list's tail), or false.
local id = redis.call("LINDEX", KEYS[1], -1)
if not id then
  return false
end
return redis.call("HGET", ARGV[1] .. id, "timestamp")
