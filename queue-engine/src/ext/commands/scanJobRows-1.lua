-- A bounded search of one state (`scan_rows` in jobRows.lua says the arguments and the
-- reply). KEYS[1]: the state's list or sorted set; ARGV[2] says which.
return scan_rows(function(start, stop, asc)
  return ids_in(KEYS[1], ARGV[2], start, stop, asc)
end)
