#!/usr/bin/env bash
# Knot DNS's user-space instructions per query, asked without EDNS (as dnsdist passes a plain
# client's query on) and with it (as skyline asks its upstream): Knot under callgrind, 1,000
# never-repeated names of a wildcard zone per leg, two legs each, alternating.
# Usage, from the repository root: benches/results/miss_latency/run11/knot_edns.sh
set -euo pipefail
cd "$(dirname "$0")/../../../.."
# shellcheck source=benches/lib.sh
source benches/lib.sh
mkdir -p "$work/knot"
port=$(free_port)
wildcard_zone example.org "$work/knot/example.org.zone"
knot_conf "$port" example.org. "$work/knot/example.org.zone"
valgrind --tool=callgrind --callgrind-out-file="$work/cg-knot" knotd -c "$work/knot/knot.conf" >"$work/knot.log" 2>&1 &
PID[knot]=$!
PORT[knot]=$port
wait_ready knot example.org. 60
count() { # tag [dnsperf flag]
  awk -v t="$1" 'BEGIN {for (i = 1; i <= 1000; i++) printf "%s%07d.example.org A\n", t, i}' >"$work/q.txt"
  callgrind_control -z "${PID[knot]}" >/dev/null 2>&1
  dnsperf -s 127.0.0.1 -p "$port" -d "$work/q.txt" -n 1 -c 1 -q 20 ${2:+"$2"} >/dev/null 2>&1
  rm -f "$work"/cg-knot.*
  callgrind_control -d "${PID[knot]}" >/dev/null 2>&1
  sleep 1
  local ir
  ir=$(cat "$work"/cg-knot.* | awk '/^summary:/ {s += $2} END {print s}')
  echo "$1 ${2:-plain}: Knot's instructions per query $((ir / 1000))"
}
for round in 1 2; do
  count "p$round"
  count "e$round" -e
done
