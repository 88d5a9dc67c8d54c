-- Shared by the read-only listing scripts (getJobRows, getWaitingRows, scanJobRows,
-- scanWaitingRows): a state's ids in a range, a bounded search of them, and a job's
-- listing row with every string cut to a bound here, in Redis, so that a job with a
-- megabyte name costs the reader a bound, not a megabyte.

-- The ids of `key` (a list, or a sorted set) from `start` to `stop`, newest first, or
-- oldest first with `asc` (a list's head is its newest job, as LPUSH leaves it).
local function ids_in(key, kind, start, stop, asc)
  if kind == "list" then
    if asc then
      local ids = redis.call("LRANGE", key, -(stop + 1), -(start + 1))
      local out = {}
      for i = #ids, 1, -1 do
        out[#out + 1] = ids[i]
      end
      return out
    end
    return redis.call("LRANGE", key, start, stop)
  end
  if asc then
    return redis.call("ZRANGE", key, start, stop)
  end
  return redis.call("ZREVRANGE", key, start, stop)
end

local function clip(text, cap)
  if text and #text > cap then
    return string.sub(text, 1, cap)
  end
  return text or ""
end

-- Appends job `id`'s row to `out`: id, whether the id was cut, name, timestamp,
-- processedOn, finishedOn, attemptsMade, failedReason, allowed attempts; all strings.
-- A job removed since its id was read has no row (returns false).
local function add_row(out, base, id, cap)
  local f = redis.call("HMGET", base .. id, "name", "timestamp", "processedOn",
    "finishedOn", "attemptsMade", "failedReason", "opts")
  if not f[1] and not f[2] then
    return false
  end
  local attempts = ""
  if f[7] then
    attempts = string.match(string.sub(f[7], 1, 4096), '"attempts":(%d+)') or ""
  end
  out[#out + 1] = clip(id, cap)
  out[#out + 1] = (#id > cap) and "1" or "0"
  out[#out + 1] = clip(f[1], cap)
  out[#out + 1] = f[2] or ""
  out[#out + 1] = f[3] or ""
  out[#out + 1] = f[4] or ""
  out[#out + 1] = f[5] or ""
  out[#out + 1] = clip(f[6], cap)
  out[#out + 1] = attempts
  return true
end

-- The waiting jobs' ids from `start` to `stop`: the wait list's, then, at positions past
-- its end, the grouped jobs waiting their turn (`grouped`: gs:waiting, change 34).
-- Always the same commands, whatever the sizes.
local function waiting_ids_in(list, grouped, start, stop, asc)
  local listed = redis.call("LLEN", list)
  local ids = {}
  if start < listed then
    ids = ids_in(list, "list", start, math.min(stop, listed - 1), asc)
  end
  if stop >= listed then
    for _, id in ipairs(ids_in(grouped, "zset", math.max(start - listed, 0), stop - listed, asc)) do
      ids[#ids + 1] = id
    end
  end
  return ids
end

-- A bounded search of the ids `ids_of(start, stop, asc)` gives. ARGV: the job key base,
-- "list" or "zset", the position to start from, how many ids to look at, how many
-- matches to return, "1" for oldest first, the cut of every string, the mode ("prefix"
-- of the id, "name" equal, "data" field equal), the needle (for "data", the wanted value
-- as JSON), the field path (dot-separated, for "data"), the most payload bytes to
-- decode, the largest payload decoded (larger ones are skipped).
-- Returns: how many ids were looked at, how many the range held, how many payloads were
-- skipped as too large, then the matches' rows.
local function scan_rows(ids_of)
  local base, from = ARGV[1], tonumber(ARGV[3])
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

  local ids = ids_of(from, from + budget - 1, asc)
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
end
