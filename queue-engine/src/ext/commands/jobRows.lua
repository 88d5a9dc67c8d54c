-- Shared by the read-only listing scripts (getJobRows, scanJobRows): a state's ids in a
-- range, and a job's listing row with every string cut to a bound here, in Redis, so
-- that a job with a megabyte name costs the reader a bound, not a megabyte.

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
