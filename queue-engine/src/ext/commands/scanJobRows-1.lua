-- A bounded search of one state. KEYS[1]: the state's list or sorted set. ARGV: the job
-- key base, "list" or "zset", the position to start from, how many ids to look at, how
-- many matches to return, "1" for oldest first, the cut of every string, the mode
-- ("prefix" of the id, "name" equal, "data" field equal), the needle (for "data", the
-- wanted value as JSON), the field path (dot-separated, for "data"), the most payload
-- bytes to decode, the largest payload decoded (larger ones are skipped).
-- Returns: how many ids were looked at, how many the range held, how many payloads were
-- skipped as too large, then the matches' rows.
local base, kind, from = ARGV[1], ARGV[2], tonumber(ARGV[3])
local budget, limit, asc = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6] == "1"
local cap, mode, needle, path = tonumber(ARGV[7]), ARGV[8], ARGV[9], ARGV[10]
local byte_budget, largest = tonumber(ARGV[11]), tonumber(ARGV[12])
local want = nil
if mode == "data" then
  want = cjson.decode(needle)
end

local function field(doc, dotted)
  local value = doc
  for part in string.gmatch(dotted, "[^.]+") do
    if type(value) ~= "table" then
      return nil
    end
    value = value[part]
  end
  return value
end

local function equal(value, wanted)
  if value == nil or type(value) == "table" then
    return false
  end
  return value == wanted or tostring(value) == tostring(wanted)
end

local ids = ids_in(KEYS[1], kind, from, from + budget - 1, asc)
local rows, matched, scanned, bytes, skipped = {}, 0, 0, 0, 0
for i, id in ipairs(ids) do
  if matched >= limit or bytes >= byte_budget then
    break
  end
  scanned = i
  local hit = false
  if mode == "prefix" then
    hit = string.sub(id, 1, #needle) == needle
  elseif mode == "name" then
    hit = redis.call("HGET", base .. id, "name") == needle
  else
    local len = redis.call("HSTRLEN", base .. id, "data")
    if len > largest then
      skipped = skipped + 1
    elseif len > 0 then
      bytes = bytes + len
      local ok, doc = pcall(cjson.decode, redis.call("HGET", base .. id, "data"))
      hit = ok and equal(field(doc, path), want)
    end
  end
  if hit and add_row(rows, base, id, cap) then
    matched = matched + 1
  end
end
local out = { tostring(scanned), tostring(#ids), tostring(skipped) }
for _, v in ipairs(rows) do
  out[#out + 1] = v
end
return out
