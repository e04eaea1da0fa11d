#!/usr/bin/env bash
# Abuse resistance and observation, measured as throughput (the instruction counts are in
# benches/results/abuse/README.md and benches/results/observability/README.md):
#
#   features  skyline's answered rate at peak load on the `a` mix with each protection and
#             observation feature on, against the echo responder (the ceiling) and against
#             skyline with everything off, in the same run; servers alternate every round
#   flood     a legitimate client (dnsperf, paced, from 127.0.1.3) while an open-loop flood runs at the
#             generator's full rate: forged with a victim's address (127.0.0.2) and forged from
#             1,024 networks (127.100.0.1, 127.100.1.1, ...), each with rate limiting off and on;
#             the client's answered share and latency, and what the forged sources received
#   all       both (default)
#
# Knobs (environment, defaults in brackets): ROUNDS [3], DURATION [10] seconds per run, BUILD [1]
# (0: use the binaries as they are), RESULTS [benches/results/abuse], SERVER_CPU [1], CLIENT_CPU
# [0], SERVICES [2500], LEGIT_RATE [2000] queries a second, RRL_RATE [20] responses a second,
# SPREAD [1024] forged networks, FLOOD_NAME [the first name of the srv mix: SRV with glue, a large
# answer, what a reflection attack asks for].
#
# Everything listens on 127.0.0.1 (the loopback /8 gives the sources), every run is bounded in
# time, and every process this script starts is stopped when it exits. As root, servers and
# generators run at real-time priority, the legitimate client above the flood.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE="${1:-all}"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-10}"
BUILD="${BUILD:-1}"
RESULTS="${RESULTS:-benches/results/abuse}"
SERVER_CPU="${SERVER_CPU:-1}"
CLIENT_CPU="${CLIENT_CPU:-0}"
SERVICES="${SERVICES:-2500}"
LEGIT_RATE="${LEGIT_RATE:-2000}"
RRL_RATE="${RRL_RATE:-20}"
SPREAD="${SPREAD:-1024}"
DOMAIN=skydns.local
BIN=target/release
VICTIM=127.0.0.2
LEGIT=127.0.1.3

case "$MODE" in all | features | flood) ;; *)
  sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
  exit 2
  ;;
esac

# shellcheck source=benches/lib.sh
source benches/lib.sh

scripts/setup.sh bench
if [ "$BUILD" = 1 ]; then
  log "building release binaries"
  cargo build --release --locked -p skyline -p skyline-bench --bins >&2
fi
"$BIN/skyline-dataset" --out "$work/data" --domain "$DOMAIN" --services "$SERVICES" --queries 100000
mkdir -p "$RESULTS"
FLOOD_NAME="${FLOOD_NAME:-$(awk '$2 == "SRV" {print $1; exit}' "$work/data/srv.txt")}"
echo "$FLOOD_NAME SRV" >"$work/data/flood.txt"

flood_prio=()
legit_prio=()
if [ ${#prio[@]} -gt 0 ]; then flood_prio=(chrt -f 1); legit_prio=(chrt -f 2); fi

# The flags of each configuration measured.
declare -A FLAGS=(
  [off]="--cookies=false"
  [cookies]=""
  [rrl]="--cookies=false --rrl-rate 1000000"
  [top]="--cookies=false --top-talkers"
  [top16]="--cookies=false --top-talkers --top-talkers-sample 16"
  [dnstap]="--cookies=false --dnstap $work/dnstap.sock"
  [querylog]="--cookies=false --query-log=/dev/null --query-log-rate 1000000"
  [all]="--rrl-rate 1000000 --top-talkers --top-talkers-sample 16 --dnstap $work/dnstap.sock"
)
FEATURES="echo off cookies rrl top top16 dnstap querylog all"

start_server() { # name, extra flags...
  local name=$1 port cmd
  shift
  port=$(free_port)
  if [ "$name" = echo ]; then
    cmd=("$BIN/skyline-echo" --addr "127.0.0.1:$port")
  else
    # shellcheck disable=SC2206 # flags are split on purpose
    cmd=("$BIN/skyline" --records "$work/data/records.json" --domain "$DOMAIN." --addr "127.0.0.1:$port"
      --workers 1 --no-pin $*)
  fi
  taskset -c "$SERVER_CPU" "${prio[@]}" "${cmd[@]}" >"$work/$name.log" 2>&1 &
  PID[$name]=$!
  PORT[$name]=$port
  wait_ready "$name" "$DOMAIN" 10
}

result() { # key, file: the value of key=value on the file's RESULT line
  sed -n "s/^RESULT.*[ ]$1=\([^ ]*\).*/\1/p" "$2" | head -1
}

median() { # numbers on stdin: their median
  sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

features() {
  local csv="$RESULTS/features.csv" round s
  echo "round,config,qps,sent,answered,lost" >"$csv"
  for s in $FEATURES; do start_server "$s" "${FLAGS[$s]:-}"; done
  for s in $FEATURES; do
    "$BIN/skyline-loadgen" -s "127.0.0.1:${PORT[$s]}" -d "$work/data/a.txt" -l 1 >/dev/null
  done
  for round in $(seq "$ROUNDS"); do
    local order=($FEATURES)
    if [ $((round % 2)) -eq 0 ]; then
      local reversed=() i
      for ((i = ${#order[@]} - 1; i >= 0; i--)); do reversed+=("${order[$i]}"); done
      order=("${reversed[@]}")
    fi
    for s in "${order[@]}"; do
      timeout $((DURATION + 30)) "${prio[@]}" taskset -c "$CLIENT_CPU" "$BIN/skyline-loadgen" \
        -s "127.0.0.1:${PORT[$s]}" -d "$work/data/a.txt" -l "$DURATION" -q 100 -b 16 >"$work/run.out"
      local qps sent answered lost
      qps=$(result qps "$work/run.out"); sent=$(result sent "$work/run.out")
      answered=$(result answered "$work/run.out"); lost=$(result lost "$work/run.out")
      echo "$round,$s,$qps,$sent,$answered,$lost" >>"$csv"
      log "$(printf 'features r%s %-9s qps=%-8s lost=%s' "$round" "$s" "$qps" "$lost")"
    done
  done
  for s in $FEATURES; do stop "$s"; done
  {
    echo "| configuration | flags | median QPS | of the echo ceiling | of everything off |"
    echo "|---|---|---|---|---|"
    local echo_qps off_qps
    echo_qps=$(awk -F, '$2 == "echo" {print $3}' "$csv" | median)
    off_qps=$(awk -F, '$2 == "off" {print $3}' "$csv" | median)
    for s in $FEATURES; do
      local q
      q=$(awk -F, -v s="$s" '$2 == s {print $3}' "$csv" | median)
      awk -v s="$s" -v f="${FLAGS[$s]:-}" -v q="$q" -v e="$echo_qps" -v o="$off_qps" -v w="$work/" 'BEGIN {
        gsub(w, "", f); if (s == "echo") f = "(skyline-echo)"; else if (f == "") f = "(defaults)"
        printf "| %s | `%s` | %.0f | %.2f | %.2f |\n", s, f, q, q / e, q / o }'
    done
  } >"$RESULTS/features.md"
  cat "$RESULTS/features.md" >&2
}

flood_one() { # round, kind (victim|spread), rrl (off|on)
  local round=$1 kind=$2 rrl=$3 name="flood-$2-$3" flags=""
  [ "$rrl" = on ] && flags="--rrl-rate $RRL_RATE"
  start_server "$name" "$flags"
  local port=${PORT[$name]} sources=(--source "$VICTIM")
  [ "$kind" = spread ] && sources=(--spread "$SPREAD")
  # The flood at the lower real-time priority, the legitimate client (dnsperf, which sleeps
  # between its paced sends) above it on the same CPU.
  timeout $((DURATION + 30)) taskset -c "$CLIENT_CPU" "${flood_prio[@]}" "$BIN/skyline-flood" -s "127.0.0.1:$port" \
    -d "$work/data/flood.txt" -l "$((DURATION + 1))" "${sources[@]}" >"$work/flood.out" &
  local flooder=$!
  sleep 0.5
  timeout $((DURATION + 30)) taskset -c "$CLIENT_CPU" "${legit_prio[@]}" dnsperf -s 127.0.0.1 -p "$port" -a "$LEGIT" \
    -d "$work/data/a.txt" -l "$((DURATION - 1))" -Q "$LEGIT_RATE" -c 1 -T 1 -q 1000 -t 1 >"$work/legit.out" 2>&1
  wait "$flooder"
  local sent answered avg max flood_qps replies truncated bytes seconds
  sent=$(awk '/Queries sent:/ {print $3}' "$work/legit.out")
  answered=$(awk '/Queries completed:/ {print $3}' "$work/legit.out")
  avg=$(awk '/Average Latency/ {printf "%.1f", $4 * 1e6}' "$work/legit.out")
  max=$(awk '/Average Latency/ {gsub(/[()]/, ""); printf "%.1f", $8 * 1e6}' "$work/legit.out")
  flood_qps=$(result qps "$work/flood.out"); replies=$(result replies "$work/flood.out")
  truncated=$(result truncated "$work/flood.out"); bytes=$(result reply_bytes "$work/flood.out")
  seconds=$(result seconds "$work/flood.out")
  stop "$name"
  echo "$round,$kind,$rrl,$sent,$answered,$avg,$max,$flood_qps,$replies,$truncated,$bytes,$seconds" >>"$RESULTS/flood.csv"
  log "$(printf 'flood r%s %-6s rrl=%-3s legit %s/%s avg_us=%-7s max_us=%-8s flood_qps=%-8s replies=%s (tc %s)' \
    "$round" "$kind" "$rrl" "$answered" "$sent" "$avg" "$max" "$flood_qps" "$replies" "$truncated")"
}

flood() {
  echo "round,flood,rrl,legit_sent,legit_answered,legit_avg_us,legit_max_us,flood_qps,flood_replies,flood_truncated,flood_reply_bytes,flood_seconds" \
    >"$RESULTS/flood.csv"
  local round kind rrl
  for round in $(seq "$ROUNDS"); do
    for kind in victim spread; do
      for rrl in off on; do flood_one "$round" "$kind" "$rrl"; done
    done
  done
  {
    echo "| flood | rate limiting | legitimate client answered (median) | its average latency (µs) | its slowest (µs) | flood sent (QPS) | replies to the forged sources a second | of them truncated (slips) | reply bytes a second |"
    echo "|---|---|---|---|---|---|---|---|---|"
    for kind in victim spread; do
      for rrl in off on; do
        awk -F, -v k="$kind" -v r="$rrl" '$2 == k && $3 == r {print $5 / $4, $6, $7, $8, $9 / $12, $10 / $12, $11 / $12}' "$RESULTS/flood.csv" |
          sort -g | awk -v k="$kind" -v r="$rrl" -v rate="$RRL_RATE" '{row[NR] = $0} END {
            split(row[int((NR + 1) / 2)], m, " ")
            printf "| %s | %s | %.2f %% | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n", k, (r == "on" ? r " (" rate "/s)" : r), m[1] * 100, m[2], m[3], m[4], m[5], m[6], m[7] }'
      done
    done
  } >"$RESULTS/flood.md"
  cat "$RESULTS/flood.md" >&2
}

case "$MODE" in
features) features ;;
flood) flood ;;
all) features; flood ;;
esac
