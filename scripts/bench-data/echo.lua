-- POST /echo with a small message (the API key is in the URL).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"message":"hello from wrk"}'
