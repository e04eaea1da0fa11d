#!/usr/bin/env bash
# skyline as a node-local cache under load while its only upstream (Knot, serving `* A` with a
# short TTL) is slowed, stopped, killed and restarted: what clients see, second by second.
#
# The load is paced (RATE queries a second, a window of 4,000): nine in ten queries ask one of
# 1,000 popular names, which expire every TTL seconds and so need the upstream again and again;
# one in ten asks a name never asked before (a miss every time). Time runs in slices of one
# second of sending, each followed by the wait for its last replies; between slices the script
# moves the upstream from phase to phase:
#
#   normal     Knot answers
#   slowed     Knot is stopped for 200 ms of every 250 ms (an overloaded upstream: answers late,
#              in bursts)
#   normal
#   stopped    Knot is stopped with SIGSTOP (a hung upstream: datagrams go unanswered)
#   resumed    SIGCONT
#   killed     Knot is killed with SIGKILL (its port is closed: datagrams are refused)
#   restarted  a new knotd on the same port
#
# Then a second skyline, with two upstreams: Knot, and the same Knot behind a relay that holds
# every query SLOW_MS (`skyline-delay`; phase `one_slow`): a slowed upstream of two should cost
# the misses little, as they go to the fast one.
#
# For each slice it prints the phase, answered and lost queries, NOERROR and SERVFAIL replies,
# stale answers (skyline's `coredns_cache_served_stale_total`), and p50/p99/p99.9/max latency.
# Lost is the number that must stay 0: every query gets an answer, stale or SERVFAIL, never
# silence.
#
# Usage: benches/upstream_faults.sh
# Knobs (environment, defaults in brackets): RATE [2000] queries a second, TTL [4] seconds of
# the upstream's answers, SLICES ["6 8 4 8 4 6 8"] slices per phase in the order above,
# SLOW_MS [100] and SLOW_SLICES [6] of the two-upstream part, SKYLINE_FLAGS ["--workers 1
# --no-pin"], SOCKETS [1] client sockets (with several workers, several sockets reach them all),
# CLIENT_CPU [0] (the load generator), SERVER_CPU [1] (skyline), KNOT_CPU [1], BUILD [1] (0:
# use the release binaries as they are). The paced load generator spins, so Knot beside it at
# the same real-time priority would run only in the throttle's 50 ms a second.
#
# Everything listens on 127.0.0.1 only, every run is bounded in time, and every process this
# script starts is stopped when it exits.
set -euo pipefail
cd "$(dirname "$0")/.."

RATE="${RATE:-2000}"
TTL="${TTL:-4}"
SLICES="${SLICES:-6 8 4 8 4 6 8}"
SLOW_MS="${SLOW_MS:-100}"
SLOW_SLICES="${SLOW_SLICES:-6}"
SKYLINE_FLAGS="${SKYLINE_FLAGS:---workers 1 --no-pin}"
SOCKETS="${SOCKETS:-1}"
CLIENT_CPU="${CLIENT_CPU:-0}"
SERVER_CPU="${SERVER_CPU:-1}"
KNOT_CPU="${KNOT_CPU:-1}"
BUILD="${BUILD:-1}"
ZONE=faults.test
PHASES=(normal slowed normal stopped resumed killed restarted)

# shellcheck source=benches/lib.sh
source benches/lib.sh

scripts/setup.sh bench
if [ "$BUILD" = 1 ]; then
  cargo build --release --locked -p skyline -p skyline-bench --bins >&2
fi

cat >"$work/zone" <<ZONEFILE
\$ORIGIN $ZONE.
\$TTL $TTL
@   SOA ns.$ZONE. hostmaster.$ZONE. 1 3600 600 86400 $TTL
@   NS  ns.$ZONE.
ns  A   192.0.2.53
*   A   192.0.2.1
ZONEFILE
echo '{"/skydns/local/skydns/node1": {"host": "10.0.0.1"}}' >"$work/records.json"
awk -v z="$ZONE" 'BEGIN {for (i = 1; i <= 1000; i++) printf "n%04d.%s A\n", i, z}' >"$work/warm.txt"

for name in knot skyline skyline-http skyline2 skyline2-http delay; do
  PORT[$name]=$(free_port)
done
knot_conf "${PORT[knot]}" "$ZONE." "$work/zone"

start_knot() {
  taskset -c "$KNOT_CPU" "${prio[@]}" knotd -c "$work/knot/knot.conf" >>"$work/knot.log" 2>&1 &
  PID[knot]=$!
  wait_ready knot "$ZONE." 10
  # Knot pins its UDP worker itself; every thread goes back to KNOT_CPU.
  taskset -a -p -c "$KNOT_CPU" "${PID[knot]}" >/dev/null
}
start_knot
start_skyline() { # name, upstreams: started, ready and warmed with the popular names
  taskset -c "$SERVER_CPU" "${prio[@]}" target/release/skyline --records "$work/records.json" \
    --nameservers "$2" --addr "127.0.0.1:${PORT[$1]}" --http-addr "127.0.0.1:${PORT[$1-http]}" \
    $SKYLINE_FLAGS >"$work/$1.log" 2>&1 &
  PID[$1]=$!
  wait_ready "$1" "$ZONE." 10
  timeout 60 dnsperf -s 127.0.0.1 -p "${PORT[$1]}" -d "$work/warm.txt" -n 1 -c 1 -q 20 -t 2 \
    >"$work/$1.warm" 2>&1
}
start_skyline skyline "127.0.0.1:${PORT[knot]}"

stale_total() { # skyline instance
  curl -s "http://127.0.0.1:${PORT[$1-http]}/metrics" |
    awk '$1 == "coredns_cache_served_stale_total" {print $2; found = 1} END {if (!found) print 0}'
}

# Stops Knot for 200 ms of every 250 ms until killed; always leaves it running.
slow_knot() {
  local knot=$1
  trap 'kill -CONT "$knot" 2>/dev/null; exit 0' TERM
  while :; do
    kill -STOP "$knot" 2>/dev/null || exit 0
    sleep 0.2
    kill -CONT "$knot" 2>/dev/null || exit 0
    sleep 0.05
  done
}

enter() { # phase
  case $1 in
    slowed) slow_knot "${PID[knot]}" & PID[slower]=$! ;;
    normal) stop slower ;;
    stopped) kill -STOP "${PID[knot]}" ;;
    resumed) kill -CONT "${PID[knot]}" ;;
    killed) kill -KILL "${PID[knot]}"; wait "${PID[knot]}" 2>/dev/null || true; unset "PID[knot]" ;;
    restarted) start_knot ;;
  esac
}

printf '%-9s %5s %6s %8s %5s %7s %8s %6s %8s %8s %8s %8s\n' phase slice time_s answered lost \
  noerror servfail stale p50_ms p99_ms p999_ms max_ms
began=$(date +%s.%N)
slice=0
lost_total=0

run_slice() { # phase, skyline instance: one second of load and its line
  local phase=$1 server=$2 line at before stale
  slice=$((slice + 1))
  awk -v z="$ZONE" -v s="$slice" -v n="$RATE" -v seed="$slice" 'BEGIN {
    srand(seed)
    for (i = 1; i <= n; i++) {
      if (i % 10 == 0) printf "new%d-%d.%s A\n", s, i, z
      else printf "n%04d.%s A\n", 1 + int(rand() * 1000), z
    }
  }' >"$work/slice.txt"
  at=$(awk -v b="$began" -v n="$(date +%s.%N)" 'BEGIN {printf "%.1f", n - b}')
  before=$(stale_total "$server")
  line=$(timeout 30 taskset -c "$CLIENT_CPU" "${prio[@]}" target/release/skyline-loadgen \
    -s "127.0.0.1:${PORT[$server]}" -d "$work/slice.txt" -Q "$RATE" -l 1 -q 4000 -t 3 -c "$SOCKETS" 2>&1 |
    grep '^RESULT' || true)
  [ -n "$line" ] || { log "slice $slice: the load generator gave no result"; exit 1; }
  stale=$(($(stale_total "$server") - before))
  get() { echo "$line" | grep -o " $1=[^ ]*" | cut -d= -f2; }
  ms() { awk -v u="$(get "$1")" 'BEGIN {print u / 1000}'; }
  lost_total=$((lost_total + $(get lost)))
  printf '%-9s %5d %6s %8s %5s %7s %8s %6s %8.1f %8.1f %8.1f %8.1f\n' "$phase" "$slice" "$at" \
    "$(get answered)" "$(get lost)" "$(get noerror)" "$(get servfail)" "$stale" \
    "$(ms p50_us)" "$(ms p99_us)" "$(ms p999_us)" "$(ms max_us)"
}

counts=($SLICES)
for p in "${!PHASES[@]}"; do
  enter "${PHASES[$p]}"
  for _ in $(seq "${counts[$p]}"); do run_slice "${PHASES[$p]}" skyline; done
done
stop slower

# Two upstreams, the second the same Knot behind a relay that holds each query SLOW_MS.
taskset -c "$KNOT_CPU" target/release/skyline-delay --addr "127.0.0.1:${PORT[delay]}" \
  --upstream "127.0.0.1:${PORT[knot]}" --delay-ms "$SLOW_MS" >"$work/delay.log" 2>&1 &
PID[delay]=$!
start_skyline skyline2 "127.0.0.1:${PORT[knot]},127.0.0.1:${PORT[delay]}"
for _ in $(seq "$SLOW_SLICES"); do run_slice one_slow skyline2; done
echo "lost in all: $lost_total; load average $(cut -d' ' -f1-3 /proc/loadavg)"
