# Shared by the load scripts (ab-shops, web-bench, web-bench-reservations); sourced, not run. Defines:
#   TMP, PIDS         a temporary directory and the processes started, stopped on exit (the
#                     directory kept when KEEP_LOGS=1)
#   free_port         a loopback port nobody listens on (the caller retries if taken first)
#   wait_for CMD N    waits up to N seconds for CMD to succeed
#   start_redis       a throwaway redis-server in $TMP: sets REDIS_PORT and REDIS_URL
#   start_etcd        a throwaway single-member etcd in $TMP: sets ETCD_PID and ETCD_ENDPOINT
#   shop_binaries B.. builds the named leasehold-examples binaries (release); sets BIN[name]
#   cpu_of PID        the CPU seconds (user + system) process PID used so far
#   median_of C TITLE column C of the caller's array `ratios` (one line of numbers per round),
#                     sorted, and its median, under TITLE
TMP=$(mktemp -d "${TMPDIR:-/tmp}/$(basename "$0").XXXXXX")
PIDS=()
declare -A BIN

cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  if [ "${KEEP_LOGS:-}" = 1 ]; then
    echo "logs kept in $TMP" >&2
  else
    rm -rf "$TMP"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
  local port tries
  for tries in $(seq 1 50); do
    port=$((20000 + RANDOM % 30000))
    if ! ss -Htln "sport = :$port" | grep -q .; then
      echo "$port"
      return 0
    fi
  done
  echo "error: found no free port" >&2
  return 1
}

wait_for() {
  local check=$1 deadline=$((SECONDS + $2))
  until eval "$check" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

# A server ($1) did not start after every try: says where its log ($2, in $TMP) is kept.
did_not_start() {
  echo "error: $1 did not start; see $TMP/$2" >&2
  KEEP_LOGS=1
  exit 1
}

start_redis() {
  local attempt port pid
  REDIS_PORT=
  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    redis-server --port "$port" --bind 127.0.0.1 --dir "$TMP" --save '' --appendonly no \
      --logfile "$TMP/redis.log" &
    pid=$!
    PIDS+=("$pid")
    if wait_for "redis-cli -p $port ping | grep -q PONG" 10; then
      REDIS_PORT=$port
      break
    fi
    kill "$pid" 2>/dev/null || true
  done
  [ -n "$REDIS_PORT" ] || did_not_start redis-server redis.log
  REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
}

start_etcd() {
  local attempt client peer pid
  ETCD_ENDPOINT=
  for attempt in 1 2 3 4 5; do
    client=$(free_port)
    peer=$(free_port)
    [ "$client" != "$peer" ] || continue
    etcd --name bench --data-dir "$TMP/etcd-$attempt" \
      --listen-client-urls "http://127.0.0.1:$client" \
      --advertise-client-urls "http://127.0.0.1:$client" \
      --listen-peer-urls "http://127.0.0.1:$peer" \
      --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
      --initial-cluster "bench=http://127.0.0.1:$peer" \
      --log-level warn >"$TMP/etcd.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    if wait_for "curl -fsS http://127.0.0.1:$client/health | grep -q true" 20; then
      ETCD_PID=$pid
      ETCD_ENDPOINT="http://127.0.0.1:$client"
      break
    fi
    kill "$pid" 2>/dev/null || true
  done
  [ -n "$ETCD_ENDPOINT" ] || did_not_start etcd etcd.log
}

shop_binaries() {
  local exe name args=()
  for name in "$@"; do
    args+=(--bin "$name")
  done
  echo "building $* (release)..." >&2
  # The executables' paths from cargo itself, wherever CARGO_TARGET_DIR puts them.
  while read -r exe; do
    BIN[$(basename "$exe")]=$exe
  done < <(cargo build --release --quiet -p leasehold-examples "${args[@]}" \
    --message-format=json-render-diagnostics |
    grep -o '"executable":"[^"]*"' | sed 's/^"executable":"//; s/"$//')
  for name in "$@"; do
    [ -x "${BIN[$name]:-}" ] || { echo "error: cargo did not build $name" >&2; exit 1; }
  done
}

# CPU seconds the process $1 used so far (user + system).
cpu_of() {
  awk -v tck="$(getconf CLK_TCK)" '{ printf "%.4f\n", ($14 + $15) / tck }' "/proc/$1/stat"
}

# Column $1 of the caller's array `ratios` (one line per round), sorted, and their median,
# under the title $2.
median_of() {
  printf '%s\n' "${ratios[@]}" | awk -v c="$1" '{ print $c }' | sort -n | awk -v t="$2" '
    { r[NR] = $1 } END {
    printf "%s, per round (sorted): ", t; for (i = 1; i <= NR; i++) printf "%s ", r[i]
    printf "\nmedian: %s\n", r[int((NR + 1) / 2)] }'
}
