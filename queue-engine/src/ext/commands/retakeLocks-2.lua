--[[
  Take back the locks of jobs whose lock merely expired: a lock renewal that could not
  reach Redis in time (a timeout, a failover) must not hand a healthy run's job to
  stalled-job recovery. A lock is taken back only when nobody else holds it and the
  job is still active; otherwise the job is another run's, or no longer running.
  KEYS[1] = active key
  KEYS[2] = stalled key
  ARGV[1] = baseKey
  ARGV[2] = tokens (msgpack array)
  ARGV[3] = jobIds (msgpack array)
  ARGV[4] = lockDuration (ms)
  Output:
    One code per job, in order: 1 the lock was held under the token and is renewed,
    2 it had expired and is taken back, 3 another token holds it, 4 the job is not
    active any more.
]]
local rcall = redis.call
local activeKey = KEYS[1]
local stalledKey = KEYS[2]
local baseKey = ARGV[1]
local tokens = cmsgpack.unpack(ARGV[2])
local jobIds = cmsgpack.unpack(ARGV[3])
local lockDuration = ARGV[4]
local results = {}
for i = 1, #jobIds, 1 do
  local jobId = jobIds[i]
  local token = tokens[i]
  local lockKey = baseKey .. jobId .. ':lock'
  local currentToken = rcall("GET", lockKey)
  if currentToken == token then
    rcall("SET", lockKey, token, "PX", lockDuration)
    rcall("SREM", stalledKey, jobId)
    results[i] = 1
  elseif currentToken then
    results[i] = 3
  elseif rcall("LPOS", activeKey, jobId) then
    rcall("SET", lockKey, token, "PX", lockDuration)
    rcall("SREM", stalledKey, jobId)
    results[i] = 2
  else
    results[i] = 4
  end
end
return results
