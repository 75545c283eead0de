-- POST /json with one descriptor; the value cycles through `distinct` values so counters stay realistic.
local counter = 0
local distinct = tonumber(os.getenv("BENCH_DISTINCT") or "1000")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  counter = counter + 1
  local value = distinct > 0 and (counter % distinct) or counter
  return wrk.format(nil, nil, nil,
    '{"domain":"bench","descriptors":[{"entries":[{"key":"client","value":"c' .. value .. '"}]}]}')
end
