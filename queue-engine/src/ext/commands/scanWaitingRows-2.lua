-- A bounded search of the waiting jobs (`scan_rows` in jobRows.lua says the arguments
-- and the reply): KEYS[1] the wait list, then KEYS[2] the grouped jobs waiting their turn
-- (gs:waiting, change 34), positions past the list's end reading those.
return scan_rows(function(start, stop, asc)
  return waiting_ids_in(KEYS[1], KEYS[2], start, stop, asc)
end)
