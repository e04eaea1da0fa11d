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
# For each slice it prints the phase, answered and lost queries, NOERROR and SERVFAIL replies,
# stale answers (skyline's `coredns_cache_served_stale_total`), and p50/p99/max latency. Lost is
# the number that must stay 0: every query gets an answer, stale or SERVFAIL, never silence.
#
# Usage: benches/upstream_faults.sh
# Knobs (environment, defaults in brackets): RATE [2000] queries a second, TTL [4] seconds of
# the upstream's answers, SLICES ["6 8 4 8 4 6 8"] slices per phase in the order above,
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

for name in knot skyline http; do PORT[$name]=$(free_port); done
knot_conf "${PORT[knot]}" "$ZONE." "$work/zone"

start_knot() {
  taskset -c "$KNOT_CPU" "${prio[@]}" knotd -c "$work/knot/knot.conf" >>"$work/knot.log" 2>&1 &
  PID[knot]=$!
  wait_ready knot "$ZONE." 10
  # Knot pins its UDP worker itself; every thread goes back to KNOT_CPU.
  taskset -a -p -c "$KNOT_CPU" "${PID[knot]}" >/dev/null
}
start_knot
taskset -c "$SERVER_CPU" "${prio[@]}" target/release/skyline --records "$work/records.json" \
  --nameservers "127.0.0.1:${PORT[knot]}" --addr "127.0.0.1:${PORT[skyline]}" \
  --http-addr "127.0.0.1:${PORT[http]}" --workers 1 --no-pin >"$work/skyline.log" 2>&1 &
PID[skyline]=$!
wait_ready skyline "$ZONE." 10
timeout 60 dnsperf -s 127.0.0.1 -p "${PORT[skyline]}" -d "$work/warm.txt" -n 1 -c 1 -q 20 -t 2 \
  >"$work/warm.out" 2>&1

stale_total() {
  curl -s "http://127.0.0.1:${PORT[http]}/metrics" |
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

printf '%-9s %5s %6s %8s %5s %7s %8s %6s %8s %8s %8s\n' phase slice time_s answered lost noerror \
  servfail stale p50_ms p99_ms max_ms
began=$(date +%s.%N)
slice=0
counts=($SLICES)
lost_total=0
for p in "${!PHASES[@]}"; do
  phase=${PHASES[$p]}
  enter "$phase"
  for _ in $(seq "${counts[$p]}"); do
    slice=$((slice + 1))
    awk -v z="$ZONE" -v s="$slice" -v n="$RATE" -v seed="$slice" 'BEGIN {
      srand(seed)
      for (i = 1; i <= n; i++) {
        if (i % 10 == 0) printf "new%d-%d.%s A\n", s, i, z
        else printf "n%04d.%s A\n", 1 + int(rand() * 1000), z
      }
    }' >"$work/slice.txt"
    at=$(awk -v b="$began" -v n="$(date +%s.%N)" 'BEGIN {printf "%.1f", n - b}')
    before=$(stale_total)
    line=$(timeout 30 taskset -c "$CLIENT_CPU" "${prio[@]}" target/release/skyline-loadgen \
      -s "127.0.0.1:${PORT[skyline]}" -d "$work/slice.txt" -Q "$RATE" -l 1 -q 4000 -t 3 2>&1 |
      grep '^RESULT' || true)
    stale=$(($(stale_total) - before))
    get() { echo "$line" | grep -o " $1=[^ ]*" | cut -d= -f2; }
    lost_total=$((lost_total + $(get lost)))
    printf '%-9s %5d %6s %8s %5s %7s %8s %6s %8.1f %8.1f %8.1f\n' "$phase" "$slice" "$at" \
      "$(get answered)" "$(get lost)" "$(get noerror)" "$(get servfail)" "$stale" \
      "$(awk -v u="$(get p50_us)" 'BEGIN {print u / 1000}')" \
      "$(awk -v u="$(get p99_us)" 'BEGIN {print u / 1000}')" \
      "$(awk -v u="$(get max_us)" 'BEGIN {print u / 1000}')"
  done
done
stop slower
echo "lost in all: $lost_total; load average $(cut -d' ' -f1-3 /proc/loadavg)"
