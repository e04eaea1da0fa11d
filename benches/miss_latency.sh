#!/usr/bin/env bash
# Miss-path latency: how much a cache miss through skyline adds to the upstream's own latency
# (the forwarding issue's target: "within 100 µs of the upstream's own"). Knot DNS serves
# example.org. with a wildcard A record, so every name resolves; skyline forwards to it. Query
# files of unique names (every query a cache miss) go at a modest fixed rate with dnsperf, once
# directly to Knot and once through skyline, alternating A/B (the order reversed every other
# round); then a run of a few repeated names through skyline (cache hits) for reference. A peer
# forwarder, dnsdist without a packet cache in front of the same Knot, takes the same miss runs
# when installed: what another forwarder adds on this machine.
# Per-query latencies come from dnsperf -v (1 µs resolution). Method: tuning.md, "Miss-path
# latency".
#
# Usage: benches/miss_latency.sh
# Knobs (environment, defaults in brackets): ROUNDS [3], DURATION [10] seconds per run, RATE
# [2000] queries per second, HIT_NAMES [8] names of the cache-hit run, CLIENT_CPU [0],
# SKYLINE_CPU [1], KNOT_CPU [1] (taskset CPU lists), SKYLINE_BIN [target/release/skyline],
# SKYLINE_FLAGS ["--workers 1 --no-pin"], PEERS ["dnsdist"; empty for none; pinned to
# SKYLINE_CPU], BASE_BIN [none: a second skyline binary, say an earlier commit's, that takes the
# same miss runs as "base", for an A/B in the same rounds], BUILD [1] (0: use the binary as it
# is), RESULTS [benches/results/miss_latency].
# A quick look: ROUNDS=1 DURATION=2 benches/miss_latency.sh
#
# Everything listens on 127.0.0.1 only, every run is bounded in time, and every process this
# script starts is stopped when it exits. As root, servers and dnsperf run at real-time
# priority (chrt -f 1) so that other work on the machine disturbs them less.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-10}"
RATE="${RATE:-2000}"
HIT_NAMES="${HIT_NAMES:-8}"
CLIENT_CPU="${CLIENT_CPU:-0}"
SKYLINE_CPU="${SKYLINE_CPU:-1}"
KNOT_CPU="${KNOT_CPU:-1}"
SKYLINE_BIN="${SKYLINE_BIN:-target/release/skyline}"
SKYLINE_FLAGS="${SKYLINE_FLAGS---workers 1 --no-pin}"
BUILD="${BUILD:-1}"
RESULTS="${RESULTS:-benches/results/miss_latency}"
PEERS="${PEERS-dnsdist}"
BASE_BIN="${BASE_BIN:-}"
ZONE=example.org
TARGET_US=100

if [ $# -gt 0 ] || { [ -n "${PEERS// /}" ] && [ "$PEERS" != dnsdist ]; }; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
  exit 2
fi

# shellcheck source=benches/lib.sh
source benches/lib.sh

# Time a process (all its threads) has run on a CPU, in ns: the scheduler's own sum, exact,
# where utime/stime are sampled at the tick (and biased when the CPU idles between queries).
# Softirq work done in the process's context (loopback delivery of what it sends) is included.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f", s}'; }

load1() { cut -d' ' -f1 /proc/loadavg; }

prepare() {
  scripts/setup.sh bench
  if [ "$BUILD" = 1 ]; then
    log "building the release binary"
    cargo build --release --locked -p skyline --bin skyline >&2
  fi
  mkdir -p "$RESULTS" "$work/knot" "$work/q"
  rm -f "$RESULTS"/runs.csv "$RESULTS"/histogram.csv "$RESULTS"/dnsperf.txt "$RESULTS"/summary.md
  # The upstream zone: every name under example.org. is an A record.
  wildcard_zone "$ZONE" "$work/knot/$ZONE.zone"
  # skyline's own zone: one record, so that every example.org. name is forwarded.
  cat >"$work/records.json" <<'JSON'
{"/skydns/local/skydns/hosts/node1": {"host": "10.0.0.101"}}
JSON
}

# Unique names of one length (the queries of every run in a round are the same size):
# <tag><7 digits>.example.org A.
names() { # tag count
  awk -v t="$1" -v n="$2" -v z="$ZONE" 'BEGIN {for (i = 1; i <= n; i++) printf "%s%07d.%s A\n", t, i, z}'
}

start() { # name cpu probe-name command...
  local name=$1 cpu=$2 probe=$3
  shift 3
  taskset -c "$cpu" "${prio[@]}" "$@" >"$work/$name.log" 2>&1 &
  PID[$name]=$!
  wait_ready "$name" "$probe" 10
  # Knot pins its UDP worker to a CPU of its own choosing at start: move every thread back.
  taskset -a -p -c "$cpu" "${PID[$name]}" >/dev/null
}

start_servers() {
  PORT[knot]=$(free_port)
  knot_conf "${PORT[knot]}" "$ZONE." "$work/knot/$ZONE.zone"
  start knot "$KNOT_CPU" "$ZONE." knotd -c "$work/knot/knot.conf"
  PORT[skyline]=$(free_port)
  # shellcheck disable=SC2086 # the flags are split on purpose
  start skyline "$SKYLINE_CPU" skydns.local. "$SKYLINE_BIN" --records "$work/records.json" \
    --nameservers "127.0.0.1:${PORT[knot]}" --addr "127.0.0.1:${PORT[skyline]}" $SKYLINE_FLAGS
  log "knot=127.0.0.1:${PORT[knot]} (pid ${PID[knot]}, cpu $KNOT_CPU)" \
    "skyline=127.0.0.1:${PORT[skyline]} (pid ${PID[skyline]}, cpu $SKYLINE_CPU)"
  if [ "$PEERS" = dnsdist ]; then
    PORT[dnsdist]=$(free_port)
    dnsdist_conf "${PORT[dnsdist]}" "${PORT[knot]}" "$ZONE" "$work/dnsdist.conf"
    start dnsdist "$SKYLINE_CPU" "$ZONE." dnsdist --supervised --disable-syslog -C "$work/dnsdist.conf"
    log "dnsdist=127.0.0.1:${PORT[dnsdist]} (pid ${PID[dnsdist]}, cpu $SKYLINE_CPU)"
  fi
  if [ -n "$BASE_BIN" ]; then
    PORT[base]=$(free_port)
    # shellcheck disable=SC2086 # the flags are split on purpose
    start base "$SKYLINE_CPU" skydns.local. "$BASE_BIN" --records "$work/records.json" \
      --nameservers "127.0.0.1:${PORT[knot]}" --addr "127.0.0.1:${PORT[base]}" $SKYLINE_FLAGS
    log "base=127.0.0.1:${PORT[base]} $BASE_BIN (pid ${PID[base]}, cpu $SKYLINE_CPU)"
  fi
  # A forwarded name must come back with Knot's answer through skyline.
  local got
  got=$(dig +short +time=2 +tries=1 @127.0.0.1 -p "${PORT[skyline]}" check0000001.$ZONE A)
  if [ "$got" != 192.0.2.1 ]; then
    log "skyline did not forward check0000001.$ZONE (got '$got')"; tail -20 "$work/skyline.log" >&2; return 1
  fi
}

# dnsperf at RATE for DURATION seconds on a query file, one client, per-query latencies kept.
# dnsperf runs at normal priority: its sending and receiving threads share the client's CPU,
# and at real-time priority a receiving thread that polls without blocking keeps the sender
# from ever running again (runs hung until the timeout that way).
query() { # server file out [duration]
  timeout $((${4:-$DURATION} + 30)) taskset -c "$CLIENT_CPU" dnsperf -s 127.0.0.1 -p "${PORT[$1]}" \
    -d "$2" -n 1 -l "${4:-$DURATION}" -c 1 -q 100 -t 2 -Q "$RATE" -v >"$3" 2>&1
}

warm_up() {
  # Page in the servers' code, open skyline's path to Knot (its round-trip estimate), and
  # fill skyline's cache with the names of the cache-hit runs.
  names w0 $((RATE)) >"$work/q/warm.txt"
  query knot "$work/q/warm.txt" "$work/warm.out" 1
  query skyline "$work/q/warm.txt" "$work/warm.out" 1
  for peer in $PEERS ${BASE_BIN:+base}; do query "$peer" "$work/q/warm.txt" "$work/warm.out" 1; done
  awk -v n="$HIT_NAMES" -v z="$ZONE" 'BEGIN {for (i = 1; i <= n; i++) printf "hx%07d.%s A\n", i, z}' >"$work/q/hit1.txt"
  query skyline "$work/q/hit1.txt" "$work/warm.out" 1
  # The hit file: the same few names over and over, enough for a whole run.
  awk -v n=$((RATE * DURATION * 11 / 10 / HIT_NAMES + 1)) '{a[NR] = $0} END {for (r = 0; r < n; r++) for (i = 1; i <= NR; i++) print a[i]}' \
    "$work/q/hit1.txt" >"$work/q/hit.txt"
}

RUNS_HEADER=round,run,server,names,load1,sent,completed,lost,noerror,qps,avg_us,p50_us,p90_us,p99_us,p999_us,max_us,server_cpu_us_per_query

run_one() { # round run (knot-miss, skyline-miss, dnsdist-miss, base-miss or skyline-hit)
  local round=$1 run=$2 server=${2%%-*} kind=${2#*-} file
  if [ "$kind" = hit ]; then
    file="$work/q/hit.txt"
  else
    file="$work/q/$run-r$round.txt"
    # Never repeated: a tag per run and round (k = direct to Knot, s = skyline, d = dnsdist,
    # b = base).
    names "${server:0:1}$round" $((RATE * DURATION * 11 / 10)) >"$file"
  fi
  local out="$work/$run-r$round.out" load before after
  load=$(load1)
  before=$(cpu_ns "${PID[$server]}")
  query "$server" "$file" "$out"
  after=$(cpu_ns "${PID[$server]}")
  # dnsperf's output without the per-query lines, and the latencies as a histogram: buckets of
  # 10 µs below 1 ms, 100 µs below 10 ms, 1 ms above (bucket_us is the lower bound).
  { echo "=== $run round $round"; grep -v '^> ' "$out" || true; } >>"$RESULTS/dnsperf.txt"
  awk -v r="$run" -v n="$round" '/^> NOERROR / {
      b = int($NF * 1e5 + 1e-6) * 10; if (b >= 10000) b = int(b / 1000) * 1000; else if (b >= 1000) b = int(b / 100) * 100; c[b]++}
    END {for (k in c) print r "," n "," k "," c[k]}' "$out" |
    sort -t, -k3,3n >>"$RESULTS/histogram.csv"
  local sent completed lost noerror qps stats cpu
  sent=$(awk '/Queries sent:/ {print $3}' "$out")
  completed=$(awk '/Queries completed:/ {print $3}' "$out")
  lost=$(awk '/Queries lost:/ {print $3}' "$out")
  noerror=$(grep -c '^> NOERROR ' "$out" || true)
  qps=$(awk '/Queries per second:/ {printf "%.0f", $4}' "$out")
  # avg p50 p90 p99 p99.9 max over the answered queries, µs.
  stats=$(awk '/^> / {print $NF * 1e6}' "$out" | sort -n | awk '
    {v[NR] = $1; s += $1}
    function q(p,  i) {i = int(p * NR + 0.999999); if (i < 1) i = 1; return v[i]}
    END {if (NR == 0) {print "nan nan nan nan nan nan"; exit}
         printf "%.1f %.0f %.0f %.0f %.0f %.0f\n", s / NR, q(0.5), q(0.9), q(0.99), q(0.999), v[NR]}')
  cpu=$(awk -v t=$((after - before)) -v n="${completed:-0}" 'BEGIN {if (n > 0) printf "%.1f", t / 1e3 / n; else print "nan"}')
  local avg p50 p90 p99 p999 max
  read -r avg p50 p90 p99 p999 max <<<"$stats"
  echo "$round,$run,$server,$(wc -l <"$file"),$load,$sent,$completed,$lost,$noerror,$qps,$avg,$p50,$p90,$p99,$p999,$max,$cpu" >>"$RESULTS/runs.csv"
  log "$(printf 'r%s %-12s load=%-5s qps=%-5s lost=%-3s avg_us=%-7s p50=%-5s p90=%-5s p99=%-5s p99.9=%-5s cpu_us/q=%s' \
    "$round" "$run" "$load" "$qps" "$lost" "$avg" "$p50" "$p90" "$p99" "$p999" "$cpu")"
}

median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

col() { # run column: that column of every round of a run, one a line
  awk -F, -v r="$1" -v c="$2" 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == c) k = i; next} $2 == r {print $k}' "$RESULTS/runs.csv"
}

# Median over the rounds of a run's column; the per-round differences of a run's column from
# another run's (knot-miss's unless named; paired: the two ran seconds apart, under the same
# load), and their median.
med() { col "$1" "$2" | median; }
diffs() { paste -d' ' <(col "$1" "$2") <(col "${3:-knot-miss}" "$2") | awk '{print $1 - $2}'; }
dmed() { diffs "$@" | median; }

# skyline's p50 minus a peer's, round by round (the two ran seconds apart, under the same load),
# and the median of those differences.
# Against dnsdist, the target too: a miss through skyline adds no more than one through dnsdist.
pdiff() { # run peer-run
  local rounds med
  rounds=$(diffs "$1" p50_us "$2" | awk '{printf "%s%+d", (NR > 1 ? ", " : ""), $1}')
  med=$(dmed "$1" p50_us "$2")
  printf '%s minus %s, p50, per round: %s µs; median **%+.1f µs**' "${1%-miss}" "${2%-miss}" "$rounds" "$med"
  if [ "$2" = dnsdist-miss ]; then
    awk -v m="$med" 'BEGIN {printf " (target, no more than dnsdist adds: %s)", m <= 0 ? "met" : "NOT met"}'
  fi
  echo
}

summary() {
  local runs run round
  runs=$(order 1)
  {
    echo "# Miss-path latency ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
    echo
    echo "skyline $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- src controlplane dataplane Cargo.toml Cargo.lock 2>/dev/null || echo '+changes'), $SKYLINE_BIN $SKYLINE_FLAGS;" \
      "$(knotd -V 2>&1 | head -1); dnsperf $(dnsperf -h 2>&1 | awk '/Version/ {print $2; exit}');" \
      "${PEERS:+$(dnsdist --version 2>&1 | head -1 | cut -d' ' -f1-2) (no packet cache); }${BASE_BIN:+base $BASE_BIN; }$(nproc) cores, kernel $(uname -r)"
    echo "rounds=$ROUNDS duration=${DURATION}s rate=${RATE}/s (-c 1 -q 100), cpus: client $CLIENT_CPU, skyline/peers $SKYLINE_CPU, knot $KNOT_CPU, priority ${prio[*]:-none}"
    echo "load average: before $LOAD_BEFORE, after $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    echo "Latency in µs (avg / p50 / p90 / p99), server CPU in µs per query; diff = run minus knot-miss of the same round."
    echo
    echo "| round | run | avg | p50 | p90 | p99 | p99.9 | CPU/query | diff avg | diff p50 |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    for round in $(seq "$ROUNDS"); do
      awk -F, -v r="$round" '
        $1 == r {n++; name[n] = $2; line[n] = sprintf("%s | %s | %s | %s | %s | %s", $11, $12, $13, $14, $15, $17); a[$2] = $11; p[$2] = $12}
        END {for (i = 1; i <= n; i++) {
               d = name[i] == "knot-miss" ? "| |" : sprintf("| %+.0f | %+.0f |", a[name[i]] - a["knot-miss"], p[name[i]] - p["knot-miss"])
               printf "| %s | %s | %s %s\n", r, name[i], line[i], d}}' "$RESULTS/runs.csv"
    done
    for run in $runs skyline-hit; do
      local d="| |"
      [ "$run" = knot-miss ] || d=$(printf '| **%+.0f** | **%+.0f** |' "$(dmed "$run" avg_us)" "$(dmed "$run" p50_us)")
      echo "| median | $run | $(med "$run" avg_us) | $(med "$run" p50_us) | $(med "$run" p90_us) | $(med "$run" p99_us) | $(med "$run" p999_us) | $(med "$run" server_cpu_us_per_query) $d"
    done
    echo
    awk -v d="$(dmed skyline-miss avg_us)" -v p="$(dmed skyline-miss p50_us)" -v t="$TARGET_US" 'BEGIN {
      printf "target: a skyline miss within %d µs of Knot directly: %s (median paired difference: avg %+.0f µs, p50 %+.0f µs)\n",
        t, (d <= t && p <= t) ? "met" : "NOT met", d, p}'
    for peer in $PEERS ${BASE_BIN:+base}; do
      echo
      pdiff skyline-miss "$peer-miss"
    done
  } >"$RESULTS/summary.md"
  cat "$RESULTS/summary.md"
}

# Order of the miss runs in a round: as listed in odd rounds, reversed in even ones (A/B, B/A).
order() {
  local list=(knot-miss skyline-miss) i peer
  for peer in $PEERS ${BASE_BIN:+base}; do list+=("$peer-miss"); done
  if [ $(($1 % 2)) -eq 1 ]; then echo "${list[@]}"; else for ((i = ${#list[@]} - 1; i >= 0; i--)); do printf '%s ' "${list[$i]}"; done; fi
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
prepare
start_servers
warm_up
echo "$RUNS_HEADER" >"$RESULTS/runs.csv"
echo "run,round,bucket_us,count" >"$RESULTS/histogram.csv"
for round in $(seq "$ROUNDS"); do
  for run in $(order "$round"); do run_one "$round" "$run"; done
  run_one "$round" skyline-hit
done
summary
