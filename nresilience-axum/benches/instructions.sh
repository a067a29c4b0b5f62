#!/usr/bin/env bash
# User-space instructions per request served over loopback by the hello-world axum server of
# benches/wrk.sh, with and without NestedRetryLayer, marker absent and present, counted by
# valgrind's callgrind: a figure that other work on the machine does not move, where
# throughput on a shared 2-core machine moves by ±10 %.
#
#   bash nresilience-axum/benches/instructions.sh      # ROUNDS=2 DURATION=5 CONNECTIONS=4
#
# Instrumentation is switched on only while wrk runs (after a warm-up), so start-up and
# shutdown are not counted; kernel work (syscalls, TCP) is not counted either, so the relative
# cost printed here is an upper bound of the share the layer takes of a request's full cost.
# Servers listen on 127.0.0.1 only and exit by themselves.
set -euo pipefail
cd "$(dirname "$0")/../.."

ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-4}
LAYERS=${LAYERS:-off identity on around}
OUT=${OUT:-target/instructions}
MARKER='x-nresilience-retrying: 1'

missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v valgrind >/dev/null || missing+=(valgrind)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
fi
cargo build --release -q -p nresilience-axum --example wrk_server
mkdir -p "$OUT"
printf 'layer\tmarker\tround\trequests\tinstructions_per_req\n' >"$OUT/results.tsv"

measure() { # layer marker round
  local layer=$1 marker=$2 round=$3 tag="$1-$2-$3" header=()
  [ "$marker" = present ] && header=(-H "$MARKER")
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/$tag.callgrind" \
    target/release/examples/wrk_server --layer "$layer" --port 0 --seconds $((DURATION + 20)) \
    >"$OUT/$tag.server" 2>"$OUT/$tag.valgrind" &
  local pid=$! port=
  for _ in $(seq 200); do
    port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$OUT/$tag.server")
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { echo "server $tag did not start" >&2; kill "$pid"; exit 1; }
  wrk -t1 -c"$CONNECTIONS" -d1s "${header[@]}" "http://127.0.0.1:$port/" >/dev/null
  callgrind_control -i on "$pid" >/dev/null
  wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" "${header[@]}" "http://127.0.0.1:$port/" >"$OUT/$tag.wrk"
  callgrind_control -i off "$pid" >/dev/null
  wait "$pid" # the server exits after --seconds; callgrind writes its totals then
  local requests instructions
  requests=$(awk '/ requests in / { print $1 }' "$OUT/$tag.wrk")
  instructions=$(awk '/^totals:/ { print $2 }' "$OUT/$tag.callgrind")
  printf '%s\t%s\t%s\t%s\t%.0f\n' "$layer" "$marker" "$round" "$requests" \
    "$(awk -v i="$instructions" -v n="$requests" 'BEGIN { print i / n }')" >>"$OUT/results.tsv"
}

for round in $(seq 1 "$ROUNDS"); do
  for layer in $LAYERS; do for marker in absent present; do measure "$layer" "$marker" "$round"; done; done
done

awk -F'\t' -v layers="$LAYERS" '
  NR > 1 { sum[$1, $2] += $5; n[$1, $2]++ }
  END {
    split(layers, L, " ")
    printf "%-9s %-8s %14s %14s %9s\n", "layer", "marker", "instr/request", "Δ vs off", "Δ"
    for (m = 1; m <= 2; m++) {
      marker = (m == 1) ? "absent" : "present"
      base = sum["off", marker] / n["off", marker]
      for (l = 1; l in L; l++) {
        v = sum[L[l], marker] / n[L[l], marker]
        printf "%-9s %-8s %14.0f %+14.0f %+8.2f%%\n", L[l], marker, v, v - base, (v / base - 1) * 100
      }
    }
  }' "$OUT/results.tsv"
echo "raw: $OUT/results.tsv (mean of $ROUNDS rounds × ${DURATION}s, $CONNECTIONS connections)"
