#!/usr/bin/env bash
# Throughput, p99 and server CPU per request of a hello-world axum server with and without
# NestedRetryLayer, marker absent and present, in one run, loaded by wrk over loopback.
#
#   bash nresilience-axum/benches/wrk.sh      # ROUNDS=10 DURATION=5 CONNECTIONS=64 NICE=0
#
# On a machine shared with other work, NICE=-20 (root) runs servers and wrk in a session of
# their own whose scheduling group has the highest priority, so that other sessions' compilers
# do not decide the figures (they are all but paused meanwhile: keep such runs short).
#
# Servers (examples/wrk_server.rs), all started at once and left running: `off` is the bare router,
# `on` has NestedRetryLayer through `Router::layer`, `identity` a layer that does nothing there
# (what axum's `Router::layer` costs for any layer), `around` NestedRetry wrapped around the
# whole router. They share CPU 0, one worker thread each; wrk runs on CPU 1 (a 2-core
# machine) and loads one server at a time. Each round visits every (server, marker) pair, in
# reverse order every other round, so drift from other work on the machine falls on all pairs
# alike; Δ is the median over rounds of the paired ratio against `off` in the same round.
# Server CPU per request comes from /proc/PID/stat, and is the figure least disturbed by other
# load. Servers listen on 127.0.0.1 only and exit by themselves after the run's length.
set -euo pipefail
cd "$(dirname "$0")/../.."

NICE=${NICE:-0}
# With autogroup scheduling, nice only orders processes within one session: take a new one.
if [ "$NICE" != 0 ] && [ -z "${WRK_SH_SESSION:-}" ]; then
  WRK_SH_SESSION=1 exec setsid --wait bash "$0" "$@"
fi

ROUNDS=${ROUNDS:-10}
DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-64}
LAYERS=${LAYERS:-off identity on around}
OUT=${OUT:-target/wrk}
MARKER='x-nresilience-retrying: 1'

if ! command -v wrk >/dev/null; then
  apt-get update -qq && apt-get install -y -qq wrk >/dev/null
fi
cargo build --release -q -p nresilience-axum --example wrk_server
if [ "$NICE" != 0 ] && [ -w /proc/self/autogroup ]; then echo "$NICE" >/proc/self/autogroup; fi
mkdir -p "$OUT"
printf 'layer\tmarker\tround\treq_per_s\tp99_us\tcpu_us_per_req\tuser_share\n' >"$OUT/results.tsv"

tick=$(getconf CLK_TCK)
slots=$(($(wc -w <<<"$LAYERS") * 2))
lifetime=$((ROUNDS * slots * (DURATION + 1) + 30))

declare -A pid port
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
for layer in $LAYERS; do
  # taskset execs the server: $! is the server itself.
  taskset -c 0 target/release/examples/wrk_server --layer "$layer" --port 0 \
    --seconds "$lifetime" --threads 1 >"$OUT/server-$layer.out" &
  pid[$layer]=$!
  pids+=($!)
done
for layer in $LAYERS; do
  for _ in $(seq 100); do
    port[$layer]=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$OUT/server-$layer.out")
    [ -n "${port[$layer]}" ] && break
    sleep 0.05
  done
  [ -n "${port[$layer]}" ] || { echo "server $layer did not start" >&2; exit 1; }
  taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d2s "http://127.0.0.1:${port[$layer]}/" >/dev/null
done

cpu_ticks() { awk '{ print $14, $15 }' "/proc/$1/stat"; } # user, system
run() { # layer marker round
  local layer=$1 marker=$2 round=$3 log="$OUT/$1-$2-$3.txt" header=()
  [ "$marker" = present ] && header=(-H "$MARKER")
  local before after
  read -ra before <<<"$(cpu_ticks "${pid[$layer]}")"
  taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency "${header[@]}" \
    "http://127.0.0.1:${port[$layer]}/" >"$log"
  read -ra after <<<"$(cpu_ticks "${pid[$layer]}")"
  local user=$((after[0] - before[0])) system=$((after[1] - before[1]))
  awk -v l="$layer" -v m="$marker" -v r="$round" -v t="$tick" -v u="$user" -v s="$system" '
    /^Requests\/sec:/ { rps = $2 }
    / requests in / { n = $1 }
    # wrk prints latency with a unit: us, ms or s.
    $1 == "99%" { p = $2 + 0; unit = $2; sub(/^[0-9.]+/, "", unit); p *= (unit == "ms") ? 1e3 : (unit == "s") ? 1e6 : 1 }
    END { printf "%s\t%s\t%s\t%s\t%.0f\t%.3f\t%.3f\n", l, m, r, rps, p, (u + s) / t / n * 1e6, u / (u + s) }' "$log" \
    >>"$OUT/results.tsv"
}

pairs=()
for layer in $LAYERS; do for marker in absent present; do pairs+=("$layer $marker"); done; done
for round in $(seq 1 "$ROUNDS"); do
  if [ $((round % 2)) -eq 1 ]; then order=("${pairs[@]}"); else
    order=(); for ((i = ${#pairs[@]} - 1; i >= 0; i--)); do order+=("${pairs[$i]}"); done; fi
  for pair in "${order[@]}"; do run $pair "$round"; done
done

awk -F'\t' -v layers="$LAYERS" -v rounds="$ROUNDS" -v dur="$DURATION" -v conns="$CONNECTIONS" '
  function median(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  NR > 1 { rps[$1, $2, $3] = $4; p99[$1, $2, $3] = $5; cpu[$1, $2, $3] = $6; us[$1, $2, $3] = $7 }
  END {
    split(layers, L, " ")
    printf "%-9s %-8s %10s %9s %9s %9s %11s %9s %6s\n", "layer", "marker", "req/s", "Δ", "p99 µs", "Δ", "cpu µs/req", "Δ", "user"
    for (m = 1; m <= 2; m++) {
      marker = (m == 1) ? "absent" : "present"
      for (l = 1; l in L; l++) {
        for (r = 1; r <= rounds; r++) {
          a[r] = rps[L[l], marker, r]; b[r] = p99[L[l], marker, r]; c[r] = cpu[L[l], marker, r]
          da[r] = a[r] / rps["off", marker, r] - 1; db[r] = b[r] / p99["off", marker, r] - 1
          dc[r] = c[r] / cpu["off", marker, r] - 1; e[r] = us[L[l], marker, r]
        }
        printf "%-9s %-8s %10.0f %+8.2f%% %9.0f %+8.2f%% %11.2f %+8.2f%% %5.0f%%\n", L[l], marker,
          median(a, rounds), median(da, rounds) * 100, median(b, rounds), median(db, rounds) * 100,
          median(c, rounds), median(dc, rounds) * 100, median(e, rounds) * 100
      }
    }
    printf "medians of %d rounds × %ds, %d connections; Δ = median of per-round ratios to off;\n", rounds, dur, conns
    printf "user = the server CPU time spent in user space (the rest is the kernel: syscalls, TCP)\n"
  }' "$OUT/results.tsv"
echo "raw: $OUT/results.tsv"
