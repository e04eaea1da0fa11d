#!/usr/bin/env bash
# Side-by-side load harness: skyline against Knot DNS on the same data in the same run, and
# both against an echo responder that does no DNS work (the ceiling). Method and numbers:
# tuning.md.
#
# Usage: benches/compare.sh [all|peak|tcp|callgrind|allocations|report]     (default: all)
#   peak       for each round, mix and generator: every server at peak load (A/B alternating,
#              the order reversed every other round); then paced runs at PACED_FRACTION of
#              each server's own median peak rate and of Knot's, with latency histograms;
#              then syscalls per query (perf) at peak load
#   tcp        DNS over TCP with dnsperf -m tcp: skyline and Knot (the echo responder has no TCP)
#              at each of TCP_CONNS connections, without pipelining (one query outstanding per
#              connection) and with it (TCP_PIPELINE queries outstanding per connection); a
#              table of medians and ratios in RESULTS/tcp.md
#   callgrind  user-space instructions per answered query, each server under valgrind, on
#              CALLGRIND_MIXES: the mixes, and `views`/`viewless` (A for names with views, and for
#              names whose view maps' lists agree: what views cost a name that has them) and
#              `alias` (A for names whose record points to a host name, answered flattened) and
#              `directory` (A for directories of one record, a registrator's usual shape)
#   allocations  the data plane's zero-allocation tests (answer path, running worker)
#   report     summary tables, JSON and the SVG picture from what is in RESULTS
#   all        peak, tcp, callgrind, the zero-allocation tests, report
#
# Knobs (environment, defaults in brackets): ROUNDS [3], DURATION [10] seconds per run, MIXES
# ["a nxdomain srv mixedcase"], GENERATORS ["loadgen dnsperf"], SERVERS ["echo skyline knot"],
# PACED_MIXES ["a"; empty for none], PACED_FRACTION [0.8], SERVICES [2500] (four A names each),
# QUERIES [100000] per mix file, CALLGRIND_QUERIES [10000], CALLGRIND_MIXES ["$MIXES views
# viewless alias directory"], WINDOW [100] and BATCH [16] for
# skyline-loadgen, SOCKETS [1] client source ports, SERVER_CPU [1] (a taskset CPU list),
# CLIENT_CPU [0], SKYLINE_BIN [target/release/skyline] (e.g. a build with another batch size),
# SKYLINE_FLAGS ["--workers 1 --no-pin"], BUILD [1] (0: use the binaries as they are), RESULTS
# [benches/results], TCP_CONNS ["1 16 64 256"], TCP_PIPELINE [10], CALLGRIND_DNSPERF [""] (more dnsperf
# flags for the callgrind runs, e.g. "-E 10:2464c4abcf10c957" to send every query a COOKIE option). A server named skyline-TAG in SERVERS runs the binary VARIANTS/skyline-TAG
# [VARIANTS: target/variants], so that builds differing in one constant are compared in the same
# run.
# A quick look: ROUNDS=1 DURATION=2 MIXES=a GENERATORS=loadgen benches/compare.sh peak
#
# Everything listens on 127.0.0.1 only, every run is bounded in time, and every process this
# script starts is stopped when it exits. As root, servers and generators run at real-time
# priority (chrt -f 1) so that other work on the machine disturbs them less.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE="${1:-all}"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-10}"
MIXES="${MIXES:-a nxdomain srv mixedcase}"
GENERATORS="${GENERATORS:-loadgen dnsperf}"
SERVERS="${SERVERS:-echo skyline knot}"
PACED_MIXES="${PACED_MIXES-a}"
PACED_FRACTION="${PACED_FRACTION:-0.8}"
SERVICES="${SERVICES:-2500}"
QUERIES="${QUERIES:-100000}"
CALLGRIND_QUERIES="${CALLGRIND_QUERIES:-10000}"
CALLGRIND_MIXES="${CALLGRIND_MIXES:-$MIXES views viewless alias directory}"
CALLGRIND_DNSPERF="${CALLGRIND_DNSPERF:-}"
WINDOW="${WINDOW:-100}"
BATCH="${BATCH:-16}"
SOCKETS="${SOCKETS:-1}"
SKYLINE_BIN="${SKYLINE_BIN:-target/release/skyline}"
SKYLINE_FLAGS="${SKYLINE_FLAGS---workers 1 --no-pin}"
BUILD="${BUILD:-1}"
VARIANTS="${VARIANTS:-target/variants}"
SERVER_CPU="${SERVER_CPU:-1}"
CLIENT_CPU="${CLIENT_CPU:-0}"
RESULTS="${RESULTS:-benches/results}"
TCP_CONNS="${TCP_CONNS:-1 16 64 256}"
TCP_PIPELINE="${TCP_PIPELINE:-10}"
DOMAIN=skydns.local
BIN=target/release

case "$MODE" in all | peak | tcp | callgrind | allocations | report) ;; *)
  sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
  exit 2
  ;;
esac

# shellcheck source=benches/lib.sh
source benches/lib.sh
tick=$(getconf CLK_TCK)

prepare() {
  if [ "$MODE" != report ]; then
    scripts/setup.sh bench
    if [ "$BUILD" = 1 ]; then
      log "building release binaries"
      cargo build --release --locked -p skyline -p skyline-bench --bins >&2
    fi
    "$BIN/skyline-dataset" --out "$work/data" --domain "$DOMAIN" --services "$SERVICES" --queries "$QUERIES"
  fi
  mkdir -p "$RESULTS/latency"
}

# Sum of user and system time of a process (all its threads), in clock ticks.
cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

server_cmd() { # name, port
  case "$1" in
  echo) echo "$BIN/skyline-echo --addr 127.0.0.1:$2" ;;
  skyline) echo "$SKYLINE_BIN --records $work/data/records.json --domain $DOMAIN. --addr 127.0.0.1:$2 $SKYLINE_FLAGS" ;;
  knot) knot_conf "$2" "$DOMAIN" "$work/data/$DOMAIN.zone"; echo "knotd -c $work/knot/knot.conf" ;;
  skyline-*) echo "$VARIANTS/$1 --records $work/data/records.json --domain $DOMAIN. --addr 127.0.0.1:$2 $SKYLINE_FLAGS" ;;
  *) log "unknown server $1"; return 1 ;;
  esac
}


field() { # key, text: the value of key=value in a RESULT line
  sed -n "s/.*[ ]$1=\([^ ]*\).*/\1/p" <<<"$2" | head -1
}

RUNS_HEADER=mode,round,mix,generator,server,rate,qps,sent,answered,lost,avg_us,p50_us,p99_us,p999_us,max_us,server_cpu_s,server_cpu_us_per_query,client_cpu_us_per_query,avg_reply_bytes

run_one() { # mode round mix generator server [rate]
  local mode=$1 round=$2 mix=$3 gen=$4 server=$5 rate=${6:-}
  local port=${PORT[$server]} pid=${PID[$server]} out="$work/run.out"
  local qps sent answered lost avg p50="nan" p99="nan" p999="nan" max="nan" client="nan" bytes
  local before after
  before=$(cpu_ticks "$pid")
  case "$gen" in
  loadgen)
    local hist="$RESULTS/latency/$mode-$mix-$gen-$server-r$round.csv"
    local pace=()
    [ -n "$rate" ] && pace=(-Q "$rate")
    timeout $((DURATION + 30)) "${prio[@]}" taskset -c "$CLIENT_CPU" "$BIN/skyline-loadgen" -s "127.0.0.1:$port" \
      -d "$work/data/$mix.txt" -l "$DURATION" -q "$WINDOW" -b "$BATCH" -c "$SOCKETS" "${pace[@]}" --histogram "$hist" >"$out"
    local line
    line=" $(grep '^RESULT ' "$out")"
    qps=$(field qps "$line"); sent=$(field sent "$line"); answered=$(field answered "$line")
    lost=$(field lost "$line"); avg=$(field avg_us "$line"); p50=$(field p50_us "$line")
    p99=$(field p99_us "$line"); p999=$(field p999_us "$line"); max=$(field max_us "$line")
    client=$(field client_cpu_us_per_query "$line"); bytes=$(field avg_reply_bytes "$line")
    ;;
  dnsperf)
    timeout $((DURATION + 30)) "${prio[@]}" taskset -c "$CLIENT_CPU" dnsperf -s 127.0.0.1 -p "$port" \
      -d "$work/data/$mix.txt" -l "$DURATION" -c 10 -T 1 -q 100 -t 2 >"$out" 2>&1
    qps=$(awk '/Queries per second:/ {print $4}' "$out")
    sent=$(awk '/Queries sent:/ {print $3}' "$out")
    answered=$(awk '/Queries completed:/ {print $3}' "$out")
    lost=$(awk '/Queries lost:/ {print $3}' "$out")
    avg=$(awk '/Average Latency/ {printf "%.1f", $4 * 1e6}' "$out")
    max=$(awk '/Average Latency/ {gsub(/[()]/, ""); printf "%.1f", $8 * 1e6}' "$out")
    bytes=$(awk '/Average packet size:/ {print $NF}' "$out")
    ;;
  esac
  after=$(cpu_ticks "$pid")
  local cpu per_query
  cpu=$(awk -v t=$((after - before)) -v hz="$tick" 'BEGIN {printf "%.2f", t / hz}')
  per_query=$(awk -v c="$cpu" -v n="${answered:-0}" 'BEGIN {if (n > 0) printf "%.3f", c * 1e6 / n; else print "nan"}')
  echo "$mode,$round,$mix,$gen,$server,$rate,$qps,$sent,$answered,$lost,$avg,$p50,$p99,$p999,$max,$cpu,$per_query,$client,$bytes" >>"$RESULTS/runs.csv"
  log "$(printf '%-6s r%s %-9s %-7s %-7s qps=%-7s lost=%-5s avg_us=%-7s p99_us=%-7s cpu_us/q=%s' \
    "$mode" "$round" "$mix" "$gen" "$server" "$qps" "$lost" "$avg" "$p99" "$per_query")"
}

# Server order for a round: as given in odd rounds, reversed in even ones (A/B, B/A, ...).
order() {
  local list=($SERVERS)
  if [ $(($1 % 2)) -eq 0 ]; then
    local i
    for ((i = ${#list[@]} - 1; i >= 0; i--)); do printf '%s ' "${list[$i]}"; done
  else
    printf '%s ' "${list[@]}"
  fi
}

# PACED_FRACTION of a server's median peak rate with skyline-loadgen on a mix; empty if unknown.
paced_rate() { # mix server
  local top
  top=$("$BIN/skyline-report" median --runs "$RESULTS/runs.csv" --mix "$1" --server "$2")
  awk -v q="$top" -v f="$PACED_FRACTION" 'BEGIN {if (q == q + 0 && q > 0) printf "%.0f", q * f}'
}

peak() {
  echo "$RUNS_HEADER" >"$RESULTS/runs.csv"
  rm -f "$RESULTS"/latency/*.csv
  for s in $SERVERS; do start "$s" "${prio[@]}"; done
  log "servers up: $(for s in $SERVERS; do printf '%s=127.0.0.1:%s(pid %s) ' "$s" "${PORT[$s]}" "${PID[$s]}"; done)"
  # Warm-up: page in the zone data and the code paths of every server.
  for s in $SERVERS; do
    "$BIN/skyline-loadgen" -s "127.0.0.1:${PORT[$s]}" -d "$work/data/a.txt" -l 1 >/dev/null
  done
  for round in $(seq "$ROUNDS"); do
    for mix in $MIXES; do
      for gen in $GENERATORS; do
        for s in $(order "$round"); do run_one peak "$round" "$mix" "$gen" "$s"; done
      done
    done
  done
  # Paced: each server at PACED_FRACTION of its own median peak ("paced"), and every server
  # at PACED_FRACTION of the peer's ("paced-common": the same offered load for all, so the
  # client's own load is the same too).
  for round in $(seq "$ROUNDS"); do
    for mix in $PACED_MIXES; do
      for s in $(order "$round"); do
        local rate
        rate=$(paced_rate "$mix" "$s")
        if [ -n "$rate" ]; then run_one paced "$round" "$mix" loadgen "$s" "$rate"; fi
        rate=$(paced_rate "$mix" knot)
        if [ -n "$rate" ]; then run_one paced-common "$round" "$mix" loadgen "$s" "$rate"; fi
      done
    done
  done
  syscalls
  for s in $SERVERS; do stop "$s"; done
}

# Syscalls per answered query of each server at peak load on the A mix, counted by perf.
syscalls() {
  if ! perf stat -e raw_syscalls:sys_enter true >/dev/null 2>&1; then
    log "perf cannot count syscalls here (not installed: Debian package linux-perf; or not allowed to trace): skipping"
    return 0
  fi
  echo "server,mix,syscalls,answered" >"$RESULTS/syscalls.csv"
  local s seconds=$((DURATION < 5 ? DURATION : 5))
  for s in $SERVERS; do
    perf stat -x, -e raw_syscalls:sys_enter -p "${PID[$s]}" -o "$work/perf.out" &
    local perf=$!
    sleep 0.2
    "${prio[@]}" taskset -c "$CLIENT_CPU" "$BIN/skyline-loadgen" -s "127.0.0.1:${PORT[$s]}" -d "$work/data/a.txt" \
      -l "$seconds" -q "$WINDOW" -b "$BATCH" >"$work/run.out"
    kill -INT "$perf"; wait "$perf" 2>/dev/null || true
    local count answered
    count=$(awk -F, '/raw_syscalls:sys_enter/ {print $1}' "$work/perf.out")
    answered=$(field answered " $(grep '^RESULT ' "$work/run.out")")
    echo "$s,a,$count,$answered" >>"$RESULTS/syscalls.csv"
    log "syscalls $s: $count for $answered answers"
  done
}

TCP_HEADER=round,connections,outstanding,server,qps,sent,answered,lost,avg_us,server_cpu_us_per_query

tcp_one() { # round connections outstanding server
  local round=$1 conns=$2 outstanding=$3 server=$4 out="$work/tcp.out" before after
  before=$(cpu_ticks "${PID[$server]}")
  timeout $((DURATION + 30)) "${prio[@]}" taskset -c "$CLIENT_CPU" dnsperf -m tcp -s 127.0.0.1 -p "${PORT[$server]}" \
    -d "$work/data/a.txt" -l "$DURATION" -c "$conns" -T 1 -q "$outstanding" -t 2 >"$out" 2>&1
  after=$(cpu_ticks "${PID[$server]}")
  local qps sent answered lost avg per_query
  qps=$(awk '/Queries per second:/ {print $4}' "$out")
  sent=$(awk '/Queries sent:/ {print $3}' "$out")
  answered=$(awk '/Queries completed:/ {print $3}' "$out")
  lost=$(awk '/Queries lost:/ {print $3}' "$out")
  avg=$(awk '/Average Latency/ {printf "%.1f", $4 * 1e6; exit}' "$out")
  per_query=$(awk -v t=$((after - before)) -v hz="$tick" -v n="${answered:-0}" \
    'BEGIN {if (n > 0) printf "%.3f", t / hz * 1e6 / n; else print "nan"}')
  echo "$round,$conns,$outstanding,$server,$qps,$sent,$answered,$lost,$avg,$per_query" >>"$RESULTS/tcp.csv"
  log "$(printf 'tcp    r%s c=%-4s q=%-5s %-8s qps=%-8s lost=%-6s avg_us=%-8s cpu_us/q=%s' \
    "$round" "$conns" "$outstanding" "$server" "$qps" "$lost" "$avg" "$per_query")"
}

# DNS over TCP, skyline against Knot in the same run, each on SERVER_CPU, A/B order alternating.
tcp() {
  echo "$TCP_HEADER" >"$RESULTS/tcp.csv"
  local servers="skyline knot" s round conns outstanding
  for s in $servers; do start "$s" "${prio[@]}"; done
  for round in $(seq "$ROUNDS"); do
    for conns in $TCP_CONNS; do
      for outstanding in "$conns" $((conns * TCP_PIPELINE)); do
        for s in $(SERVERS="$servers" order "$round"); do tcp_one "$round" "$conns" "$outstanding" "$s"; done
      done
    done
  done
  for s in $servers; do stop "$s"; done
  tcp_report
}

# The TCP table: median QPS per point and server over the rounds, and skyline's ratio to Knot.
tcp_report() {
  awk -F, '
    function median(list,   n, v, i, j, t) {
      n = split(list, v, " ")
      for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
      return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    NR > 1 {
      key = $2 "," $3
      if (!(key in seen)) { seen[key] = 1; order[++points] = key }
      qps[key, $4] = qps[key, $4] " " $5; lost[key, $4] += $8
    }
    END {
      print "| connections | outstanding | skyline q/s | Knot q/s | skyline / Knot | lost (skyline, Knot) |"
      print "|---|---|---|---|---|---|"
      for (i = 1; i <= points; i++) {
        split(order[i], p, ",")
        sky = median(qps[order[i], "skyline"]); knot = median(qps[order[i], "knot"])
        printf "| %s | %s | %.0f | %.0f | %.2f | %d, %d |\n", p[1], p[2], sky, knot, (knot > 0 ? sky / knot : 0),
          lost[order[i], "skyline"], lost[order[i], "knot"]
      }
    }' "$RESULTS/tcp.csv" >"$RESULTS/tcp.md"
  cat "$RESULTS/tcp.md" >&2
}


callgrind() {
  command -v valgrind >/dev/null && command -v callgrind_control >/dev/null || {
    log "valgrind is not installed: skipping callgrind"; return 0
  }
  echo "server,mix,instructions,answered" >"$RESULTS/callgrind.csv"
  mkdir -p "$work/cg"
  for mix in $CALLGRIND_MIXES; do head -n "$CALLGRIND_QUERIES" "$work/data/$mix.txt" >"$work/cg/$mix.txt"; done
  for s in $SERVERS; do
    READY_SECONDS=120 start "$s" valgrind --tool=callgrind --callgrind-out-file="$work/cg/$s.%p"
    local pid=${PID[$s]}
    # Warm-up, so that first-touch work is not counted.
    dnsperf -s 127.0.0.1 -p "${PORT[$s]}" -d "$work/cg/a.txt" -n 1 -c 1 -q 20 -t 5 >/dev/null
    for mix in $CALLGRIND_MIXES; do
      callgrind_control -z "$pid" >/dev/null 2>&1
      ls "$work/cg/$s.$pid".* >"$work/cg/before" 2>/dev/null || true
      # shellcheck disable=SC2086 # the extra flags are split on purpose
      dnsperf -s 127.0.0.1 -p "${PORT[$s]}" -d "$work/cg/$mix.txt" -n 1 -c 1 -q 20 -t 5 $CALLGRIND_DNSPERF >"$work/cg/out" 2>&1
      callgrind_control -d "$pid" >/dev/null 2>&1
      local answered instructions
      answered=$(awk '/Queries completed:/ {print $3}' "$work/cg/out")
      instructions=$(new_instructions "$work/cg/before" "$work/cg/$s.$pid")
      echo "$s,$mix,$instructions,$answered" >>"$RESULTS/callgrind.csv"
      log "callgrind $s $mix: $instructions instructions for $answered answers: $(awk -v i="$instructions" -v n="$answered" 'BEGIN {if (n > 0) printf "%.0f", i / n}') per query"
    done
    stop "$s"
  done
}

allocations() {
  log "zero-allocation tests of the answer path and of a running worker"
  if cargo test --release --locked -p skyline-dataplane --test alloc --test udp_alloc >"$work/alloc.out" 2>&1; then
    echo pass >"$RESULTS/allocations.txt"
  else
    tail -30 "$work/alloc.out" >&2
    echo fail >"$RESULTS/allocations.txt"
  fi
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
    echo "rounds=$ROUNDS duration=$DURATION window=$WINDOW batch=$BATCH sockets=$SOCKETS services=$SERVICES priority=${prio[*]:-none}"
    echo "server cpu=$SERVER_CPU client cpu=$CLIENT_CPU skyline=$SKYLINE_BIN $SKYLINE_FLAGS"
  } >"$RESULTS/environment.txt"
}

report() {
  local extra=()
  [ -f "$RESULTS/callgrind.csv" ] && extra+=(--callgrind "$RESULTS/callgrind.csv")
  [ -f "$RESULTS/syscalls.csv" ] && extra+=(--syscalls "$RESULTS/syscalls.csv")
  [ -f "$RESULTS/allocations.txt" ] && extra+=(--allocations "$RESULTS/allocations.txt")
  "$BIN/skyline-report" summary --runs "$RESULTS/runs.csv" --latency "$RESULTS/latency" --out "$RESULTS" "${extra[@]}"
  log "results: $RESULTS/summary.md, $RESULTS/summary.json, $RESULTS/compare.svg"
}

prepare
case "$MODE" in
all) environment; peak; tcp; callgrind; allocations; report ;;
peak) environment; peak; report ;;
tcp) environment; tcp ;;
callgrind) callgrind; if [ -f "$RESULTS/runs.csv" ]; then report; fi ;;
allocations) allocations; if [ -f "$RESULTS/runs.csv" ]; then report; fi ;;
report) report ;;
esac
