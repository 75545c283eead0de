-- POST /json with BENCH_DESCRIPTORS descriptors (default 1); values cycle through BENCH_DISTINCT values
-- (0 = every request new) so counters stay realistic.
local counter = 0
local distinct = tonumber(os.getenv("BENCH_DISTINCT") or "1000")
local descriptors = tonumber(os.getenv("BENCH_DESCRIPTORS") or "1")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  counter = counter + 1
  local value = distinct > 0 and (counter % distinct) or counter
  local parts = {}
  for i = 1, descriptors do
    parts[i] = '{"entries":[{"key":"client","value":"c' .. value .. '-' .. i .. '"}]}'
  end
  return wrk.format(nil, nil, nil, '{"domain":"bench","descriptors":[' .. table.concat(parts, ",") .. ']}')
end
