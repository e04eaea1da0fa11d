#!/usr/bin/env bash
# DNSSEC online signing under load (docs/dnssec.md): in one run, skyline's unsigned A answers
# against its signed ones (DO=1), signed NXDOMAIN for random names, and Knot DNS serving the same
# data signed (dnssec-signing, its default ECDSA P-256 policy) as the peer; then user-space
# instructions per answer under callgrind. Method and numbers: tuning.md, "DNSSEC".
#
# Usage: benches/dnssec.sh [all|peak|callgrind]     (default: all)
#   peak       for each round: every (server, mix) pair at peak load with dnsperf, the order
#              reversed every other round; medians and ratios in RESULTS/summary.md
#   callgrind  instructions per answered query, each server under valgrind: skyline unsigned
#              and signed A, signed NXDOMAIN; with BEFORE_BIN, that binary's unsigned A too (the
#              build before DNSSEC, to see that unsigned answers did not get slower)
#
# Knobs (environment, defaults in brackets): ROUNDS [5], DURATION [10] seconds per run, SERVICES
# [2500] (four A names each), QUERIES [100000] per mix file, CALLGRIND_QUERIES [10000],
# SERVER_CPU [1], CLIENT_CPU [0], SKYLINE_BIN [target/release/skyline], BEFORE_BIN [none],
# SKYLINE_FLAGS ["--workers 1 --no-pin"], BUILD [1] (0: use the binaries as they are), RESULTS
# [benches/results/dnssec].
#
# Everything listens on 127.0.0.1 only, every run is bounded in time, and every process this
# script starts is stopped when it exits.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE="${1:-all}"
ROUNDS="${ROUNDS:-5}"
DURATION="${DURATION:-10}"
SERVICES="${SERVICES:-2500}"
QUERIES="${QUERIES:-100000}"
CALLGRIND_QUERIES="${CALLGRIND_QUERIES:-10000}"
SERVER_CPU="${SERVER_CPU:-1}"
CLIENT_CPU="${CLIENT_CPU:-0}"
SKYLINE_BIN="${SKYLINE_BIN:-target/release/skyline}"
BEFORE_BIN="${BEFORE_BIN:-}"
SKYLINE_FLAGS="${SKYLINE_FLAGS---workers 1 --no-pin}"
BUILD="${BUILD:-1}"
RESULTS="${RESULTS:-benches/results/dnssec}"
# Seconds a server has to answer at start (a signing Knot takes longer than the default).
READY_SECONDS="${READY_SECONDS:-30}"
DOMAIN=skydns.local
BIN=target/release

case "$MODE" in all | peak | callgrind) ;; *)
  sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
  exit 2
  ;;
esac

# shellcheck source=benches/lib.sh
source benches/lib.sh

# What is measured: server, mix file, dnsperf flags (-D sets DO).
CASES=(
  "skyline a -"
  "skyline-signed a -D"
  "skyline-signed nxdomain -D"
  "knot-signed a -D"
  "knot-signed nxdomain -D"
)

prepare() {
  scripts/setup.sh bench
  if [ "$BUILD" = 1 ]; then
    log "building release binaries"
    cargo build --release --locked -p skyline -p skyline-bench --bins >&2
  fi
  "$BIN/skyline-dataset" --out "$work/data" --domain "$DOMAIN" --services "$SERVICES" --queries "$QUERIES"
  (cd "$work" && dnssec-keygen -q -f KSK -a ECDSAP256SHA256 "$DOMAIN" >keybase)
  mkdir -p "$RESULTS"
}

server_cmd() { # name, port
  local serve="--records $work/data/records.json --domain $DOMAIN. --addr 127.0.0.1:$2 $SKYLINE_FLAGS"
  case "$1" in
  skyline) echo "$SKYLINE_BIN $serve" ;;
  skyline-before) echo "$BEFORE_BIN $serve" ;;
  skyline-signed) echo "$SKYLINE_BIN $serve --dnssec $work/$(cat "$work/keybase")" ;;
  knot-signed)
    knot_conf "$2" "$DOMAIN" "$work/data/$DOMAIN.zone"
    echo "    dnssec-signing: on" >>"$work/knot/knot.conf"
    echo "knotd -c $work/knot/knot.conf"
    ;;
  *) log "unknown server $1"; return 1 ;;
  esac
}

# Until the signed server answers the apex DNSKEY with its RRSIG (Knot signs after it loads).
wait_signed() { # name
  for _ in $(seq 120); do
    dig +dnssec +norec +time=1 +tries=1 @127.0.0.1 -p "${PORT[$1]}" "$DOMAIN" DNSKEY | grep -q RRSIG && return 0
    sleep 0.5
  done
  log "$1 does not answer signed"; return 1
}

peak() {
  echo "round,server,mix,flags,qps,sent,answered,lost,avg_us,avg_reply_bytes" >"$RESULTS/runs.csv"
  local s
  for s in skyline skyline-signed knot-signed; do start "$s" "${prio[@]}"; done
  wait_signed skyline-signed
  wait_signed knot-signed
  for s in skyline skyline-signed knot-signed; do
    dnsperf -s 127.0.0.1 -p "${PORT[$s]}" -d "$work/data/a.txt" -l 1 -D >/dev/null 2>&1
  done
  local round i n=${#CASES[@]} out="$work/run.out"
  for round in $(seq "$ROUNDS"); do
    for ((i = 0; i < n; i++)); do
      local c=$i
      [ $((round % 2)) -eq 0 ] && c=$((n - 1 - i))
      read -r server mix flags <<<"${CASES[$c]}"
      local dflag=()
      [ "$flags" = -D ] && dflag=(-D)
      timeout $((DURATION + 30)) "${prio[@]}" taskset -c "$CLIENT_CPU" dnsperf -s 127.0.0.1 -p "${PORT[$server]}" \
        -d "$work/data/$mix.txt" -l "$DURATION" -c 10 -T 1 -q 100 -t 2 "${dflag[@]}" >"$out" 2>&1
      local qps sent answered lost avg bytes
      qps=$(awk '/Queries per second:/ {print $4}' "$out")
      sent=$(awk '/Queries sent:/ {print $3}' "$out")
      answered=$(awk '/Queries completed:/ {print $3}' "$out")
      lost=$(awk '/Queries lost:/ {print $3}' "$out")
      avg=$(awk '/Average Latency/ {printf "%.1f", $4 * 1e6}' "$out")
      bytes=$(awk '/Average packet size:/ {print $NF}' "$out")
      echo "$round,$server,$mix,$flags,$qps,$sent,$answered,$lost,$avg,$bytes" >>"$RESULTS/runs.csv"
      log "$(printf 'r%s %-15s %-9s %-2s qps=%-8s lost=%-6s avg_us=%-7s bytes=%s' \
        "$round" "$server" "$mix" "$flags" "$qps" "$lost" "$avg" "$bytes")"
    done
  done
  for s in skyline skyline-signed knot-signed; do stop "$s"; done
  summary
}

# Medians per case, and the ratios the target is stated in: medians of the ratios within each
# round (the cases of one round ran back to back, so the machine's drift cancels), and the ratio
# of the medians beside them.
summary() {
  awk -F, 'NR > 1 {key = $2 " " $3 " " $4; q[key] = q[key] " " $5; b[key] = $10; r[$1 "," key] = $5; rounds[$1] = 1}
    function median(list,   v, n, i, j, t) {
      n = split(list, v, " ")
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
      return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    function ratio(a, b,   list, round) {
      list = ""
      for (round in rounds) if (r[round "," b] > 0) list = list " " r[round "," a] / r[round "," b]
      return median(list)
    }
    END {
      print "| server | mix | dnsperf | median qps | reply bytes |"
      print "|---|---|---|---:|---:|"
      for (k in q) { m[k] = median(q[k]); split(k, p, " "); printf "| %s | %s | %s | %.0f | %s |\n", p[1], p[2], p[3], m[k], b[k] }
      print ""
      print "| ratio | median of the rounds\x27 ratios | ratio of the medians |"
      print "|---|---:|---:|"
      printf "| signed A / unsigned A (skyline) | %.2f | %.2f |\n", ratio("skyline-signed a -D", "skyline a -"), m["skyline-signed a -D"] / m["skyline a -"]
      printf "| signed A, skyline / Knot | %.2f | %.2f |\n", ratio("skyline-signed a -D", "knot-signed a -D"), m["skyline-signed a -D"] / m["knot-signed a -D"]
      printf "| signed NXDOMAIN, skyline / Knot | %.2f | %.2f |\n", ratio("skyline-signed nxdomain -D", "knot-signed nxdomain -D"), m["skyline-signed nxdomain -D"] / m["knot-signed nxdomain -D"]
    }' "$RESULTS/runs.csv" >"$RESULTS/summary.md"
  cat "$RESULTS/summary.md" >&2
}


callgrind() {
  command -v valgrind >/dev/null && command -v callgrind_control >/dev/null || {
    log "valgrind is not installed: skipping callgrind"; return 0
  }
  echo "server,mix,flags,instructions,answered" >"$RESULTS/callgrind.csv"
  mkdir -p "$work/cg"
  local mix
  for mix in a nxdomain; do head -n "$CALLGRIND_QUERIES" "$work/data/$mix.txt" >"$work/cg/$mix.txt"; done
  local runs=("skyline a -" "skyline-signed a -D" "skyline-signed nxdomain -D")
  [ -n "$BEFORE_BIN" ] && runs=("skyline-before a -" "${runs[@]}")
  local run s flags
  for run in "${runs[@]}"; do
    read -r s mix flags <<<"$run"
    [ -n "${PID[$s]:-}" ] || READY_SECONDS=120 start "$s" valgrind --tool=callgrind --callgrind-out-file="$work/cg/$s.%p"
    local pid=${PID[$s]} dflag=()
    [ "$flags" = -D ] && dflag=(-D)
    # Warm-up, so that first-touch work is not counted; the NXDOMAIN run then counts signing
    # (its names are new to the worker's cache).
    dnsperf -s 127.0.0.1 -p "${PORT[$s]}" -d "$work/cg/a.txt" -n 1 -c 1 -q 20 -t 5 "${dflag[@]}" >/dev/null
    callgrind_control -z "$pid" >/dev/null 2>&1
    ls "$work/cg/$s.$pid".* >"$work/cg/before" 2>/dev/null || true
    dnsperf -s 127.0.0.1 -p "${PORT[$s]}" -d "$work/cg/$mix.txt" -n 1 -c 1 -q 20 -t 5 "${dflag[@]}" >"$work/cg/out" 2>&1
    callgrind_control -d "$pid" >/dev/null 2>&1
    local answered instructions
    answered=$(awk '/Queries completed:/ {print $3}' "$work/cg/out")
    instructions=$(new_instructions "$work/cg/before" "$work/cg/$s.$pid")
    echo "$s,$mix,$flags,$instructions,$answered" >>"$RESULTS/callgrind.csv"
    log "callgrind $s $mix $flags: $instructions instructions for $answered answers: $(awk -v i="$instructions" -v n="$answered" 'BEGIN {if (n > 0) printf "%.0f", i / n}') per query"
    stop "$s"
  done
}

environment() {
  {
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "kernel: $(uname -r)"
    echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(nproc) cores"
    echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "knotd: $(knotd -V 2>&1 | head -1)"
    echo "dnsperf: $(dnsperf -h 2>&1 | awk '/Version/ {print $2; exit}')"
    echo "skyline: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo '+changes')"
    echo "rounds=$ROUNDS duration=$DURATION services=$SERVICES priority=${prio[*]:-none}"
    echo "server cpu=$SERVER_CPU client cpu=$CLIENT_CPU skyline=$SKYLINE_BIN $SKYLINE_FLAGS before=${BEFORE_BIN:-none}"
  } >"$RESULTS/environment.txt"
}

prepare
environment
case "$MODE" in
peak) peak ;;
callgrind) callgrind ;;
all) peak; callgrind ;;
esac
