# scripts/bench regions (sourced by scripts/bench): several regions (docs/guides/regions.md). The bench's instance
# is region a; two more redis-servers on core 1 stand in for its local replicas of regions b and c, holding
# 1000 hits on each bench key of the current hour, as those regions' counts would be (so every decision has
# remote totals to add: the costlier path).
#   1. decisions: grpc and /json with REDIS_REGION unset and with three regions, alternately, twice; then
#      callgrind of each;
#   2. remote reads: for each of BENCH_REGION_KEYS (default "10000 100000 1000000") active keys, made by /json
#      over that many distinct values, then 10 s without traffic: the server's CPU (the control thread's reads
#      and views), the commands and bytes the remote Redis servers saw, per second, and the server's RSS
#      (BENCH_IO_THREADS workers: each holds a key -> slot map of every key).
# BENCH_REGION_PARTS picks some of "rates callgrind reads" (1. is rates and callgrind, 2. is reads).
# BENCH_REGION_COLD=<duration> runs the three regions with REDIS_REMOTE_COLD_INTERVAL set to it.

region_remote_ports=()
region_remote_pids=()

start_region_remotes() {
  local i port
  for i in 0 1; do
    port=$(free_port)
    taskset -c 1 redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >"$work/remote$i.log" &
    region_remote_pids+=($!)
    region_remote_ports+=("$port")
    for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  done
}

stop_region_remotes() {
  local pid
  for pid in "${region_remote_pids[@]}"; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; done
  region_remote_pids=()
  region_remote_ports=()
}

# The bench keys of this hour in both remotes: c1 (json-body.json), c1-1 (gRPC) and c0-1 ... c<n-1>-1 (json.lua).
fill_region_remotes() {  # n
  local hour=$(($(date +%s) / 3600 * 3600)) port
  for port in "${region_remote_ports[@]}"; do
    redis-cli -p "$port" flushall >/dev/null
    redis-cli -p "$port" eval "for i = 0, tonumber(ARGV[1]) - 1 do redis.call('SET', 'bench_client_c' .. i .. '-1_' .. ARGV[2], 1000) end
      redis.call('SET', 'bench_client_c1_' .. ARGV[2], 1000) return 1" 0 "$1" "$hour" >/dev/null
  done
}

use_regions() {  # single|three
  module_env=()
  [[ "$1" == three ]] && module_env=(REDIS_REGION=a
    "REDIS_REMOTE_REGIONS=b=127.0.0.1:${region_remote_ports[0]},c=127.0.0.1:${region_remote_ports[1]}")
  [[ "$1" == three && -n "${BENCH_REGION_COLD:-}" ]] && module_env+=("REDIS_REMOTE_COLD_INTERVAL=$BENCH_REGION_COLD")
  return 0
}

remote_counter() {  # port, INFO field (stats) or cmdstat name
  if [[ "$2" == cmdstat_* ]]; then
    redis-cli -p "$1" info commandstats | awk -F'[:=,]' -v c="$2" '$1 == c { print $3; f = 1 } END { if (!f) print 0 }'
  else
    redis-cli -p "$1" info stats | awk -F: -v k="$2" '$1 == k { print $2 + 0 }'
  fi
}

run_regions() {
  backend=redis
  descriptors=1
  start_region_remotes
  fill_region_remotes 1000
  local round choice keys
  local parts=" ${BENCH_REGION_PARTS:-rates callgrind reads} "
  [[ "$parts" != *" rates "* ]] || for round in 1 2; do
    for choice in single three; do
      use_regions "$choice"
      echo "== regions round $round: $choice ${module_env[*]}"
      run_grpc
      run_json
    done
  done
  [[ "$parts" != *" callgrind "* ]] || for choice in single three; do
    use_regions "$choice"
    echo "== regions callgrind: $choice ${module_env[*]}"
    run_callgrind
  done
  use_regions three
  [[ "$parts" == *" reads "* ]] || BENCH_REGION_KEYS=" "
  for keys in ${BENCH_REGION_KEYS:-10000 100000 1000000}; do
    fill_region_remotes "$keys"
    start_server
    echo "== regions: $keys active keys (BENCH_DISTINCT=$keys /json, 2 passes), then 10 s idle"
    BENCH_DISTINCT=$keys taskset -c 1 wrk -t1 -c64 -d600s -s scripts/bench-data/json.lua \
      "http://127.0.0.1:$http_port/json" >"$work/wrk.out" &
    local wrk_pid=$! sent
    # Until every key has been used twice (the reader tracks each after its first use).
    for _ in $(seq 6000); do
      sent=$(redis-cli -p "$redis_port" dbsize)
      [[ "$sent" -ge "$keys" ]] && break
      sleep 0.1
    done
    sleep 2
    kill "$wrk_pid" 2>/dev/null; wait "$wrk_pid" 2>/dev/null || true
    sleep 1
    local t0 out0 in0 mget0 info0 start
    t0=$(ticks_of "$server_pid")
    out0=$(remote_counter "${region_remote_ports[0]}" total_net_output_bytes)
    in0=$(remote_counter "${region_remote_ports[0]}" total_net_input_bytes)
    mget0=$(remote_counter "${region_remote_ports[0]}" cmdstat_mget)
    info0=$(remote_counter "${region_remote_ports[0]}" cmdstat_info)
    start=$(date +%s%N)
    sleep 10
    awk -v t="$(($(ticks_of "$server_pid") - t0))" -v hz="$(getconf CLK_TCK)" -v k="$keys" \
      -v ms="$((($(date +%s%N) - start) / 1000000))" \
      -v o="$(($(remote_counter "${region_remote_ports[0]}" total_net_output_bytes) - out0))" \
      -v i="$(($(remote_counter "${region_remote_ports[0]}" total_net_input_bytes) - in0))" \
      -v m="$(($(remote_counter "${region_remote_ports[0]}" cmdstat_mget) - mget0))" \
      -v r="$(($(remote_counter "${region_remote_ports[0]}" cmdstat_info) - info0))" \
      -v rss="$(awk '/^VmRSS/ { print $2 }' "/proc/$server_pid/status")" -v w="${BENCH_IO_THREADS:-1}" \
      'BEGIN { s = ms / 1000; printf "regions: %d keys, 2 remote regions: server CPU %.1f%% of a core (%.1f ms per round, %.2f ms per round per 10k keys); per remote region per second: %.1f rounds, %.1f MGET, %.0f kB in (replies), %.0f kB out (requests); RSS %.0f MB with %d workers\n",
               k, t / hz / s * 100, t / hz * 1000 / (r), t / hz * 1000 / r / (k / 10000), r / s, m / s, o / s / 1024, i / s / 1024, rss / 1024, w }'
    stop_server
  done
  stop_region_remotes
}
