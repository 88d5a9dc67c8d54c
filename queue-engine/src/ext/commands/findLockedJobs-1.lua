--[[
  Find the active jobs locked under the given tokens: those a worker's fetch moved to
  active while its answer was lost (the connection dropped), which nobody would run
  until their lock expired and stalled-job recovery moved them back.
  KEYS[1] = active key
  ARGV[1] = baseKey
  ARGV[2] = tokens (msgpack array)
  Output:
    A flat array: job id, token, job id, token, ...
]]
local rcall = redis.call
local baseKey = ARGV[1]
local wanted = {}
for _, token in ipairs(cmsgpack.unpack(ARGV[2])) do
  wanted[token] = true
end
local found = {}
for _, jobId in ipairs(rcall("LRANGE", KEYS[1], 0, -1)) do
  local token = rcall("GET", baseKey .. jobId .. ':lock')
  if token and wanted[token] then
    table.insert(found, jobId)
    table.insert(found, token)
  end
end
return found
