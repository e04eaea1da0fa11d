#!/usr/bin/env bash
# User-space instructions per cache miss: skyline (one worker) and dnsdist (no packet cache)
# under callgrind, each forwarding never-repeated names to Knot DNS, which serves example.org.
# with a wildcard A record. The work a forwarder does for a miss, counted rather than timed:
# the latency of a miss on this 2-core machine swings more from run to run than the two
# forwarders differ (benches/miss_latency.sh).
#
# Each forwarder first forwards SETTLE_NAMES names (so that it knows the upstream's round-trip
# time: until skyline does, its tries wait longer) and waits SETTLE seconds; then its counters
# are zeroed, MISSES new names are sent once with `dnsperf -n 1 -c 1 -q 20`, the timers of
# their questions are left to fire (SETTLE seconds; dnsdist's health checks run meanwhile, as
# they would), and the instructions of the whole process, every thread, are divided by the
# answered queries.
#
# Usage: benches/miss_instructions.sh
# Knobs (environment, defaults in brackets): MISSES [1000], SETTLE_NAMES [20], SETTLE [2]
# seconds, SKYLINE_BIN [target/release/skyline], PEERS ["dnsdist"; empty for none], BUILD [1]
# (0: use the binary as it is), KEEP [none] (a directory to keep the callgrind files in, one per
# forwarder, for `callgrind_annotate`).
#
# Everything listens on 127.0.0.1 only, every run is bounded in time, and every process this
# script starts is stopped when it exits.
set -euo pipefail
cd "$(dirname "$0")/.."

MISSES="${MISSES:-1000}"
SETTLE_NAMES="${SETTLE_NAMES:-20}"
SETTLE="${SETTLE:-2}"
SKYLINE_BIN="${SKYLINE_BIN:-target/release/skyline}"
PEERS="${PEERS-dnsdist}"
BUILD="${BUILD:-1}"
ZONE=example.org

# shellcheck source=benches/lib.sh
source benches/lib.sh

scripts/setup.sh bench
if [ "$BUILD" = 1 ]; then
  cargo build --release --locked -p skyline --bin skyline >&2
fi
if [ -n "$PEERS" ] && [ "$PEERS" != dnsdist ]; then
  log "PEERS may only be dnsdist or empty"
  exit 2
fi

mkdir -p "$work/knot"
wildcard_zone "$ZONE" "$work/knot/$ZONE.zone"
PORT[knot]=$(free_port)
knot_conf "${PORT[knot]}" "$ZONE." "$work/knot/$ZONE.zone"
knotd -c "$work/knot/knot.conf" >"$work/knot.log" 2>&1 &
PID[knot]=$!
wait_ready knot "$ZONE." 10
cat >"$work/records.json" <<'JSON'
{"/skydns/local/skydns/hosts/node1": {"host": "10.0.0.101"}}
JSON

names() { # tag count: never-repeated names, <tag><7 digits>.example.org A
  awk -v t="$1" -v n="$2" -v z="$ZONE" 'BEGIN {for (i = 1; i <= n; i++) printf "%s%07d.%s A\n", t, i, z}'
}

query() { # name file: sends it once to the forwarder, prints how many queries were answered
  dnsperf -s 127.0.0.1 -p "${PORT[$1]}" -d "$2" -n 1 -c 1 -q 20 -t 5 | awk '/Queries completed:/ {print $3}'
}

measure() { # name probe-name command...: sets PER_MISS[name], the forwarder's instructions per miss
  local name=$1 probe=$2
  shift 2
  valgrind --tool=callgrind --callgrind-out-file="$work/cg-$name" "$@" >"$work/$name.log" 2>&1 &
  PID[$name]=$!
  wait_ready "$name" "$probe" 120
  names "${name:0:1}s" "$SETTLE_NAMES" >"$work/$name-settle.txt"
  names "${name:0:1}m" "$MISSES" >"$work/$name-misses.txt"
  query "$name" "$work/$name-settle.txt" >/dev/null
  sleep "$SETTLE"
  callgrind_control -z "${PID[$name]}" >/dev/null 2>&1
  local answered instructions
  answered=$(query "$name" "$work/$name-misses.txt")
  sleep "$SETTLE"
  callgrind_control -d "${PID[$name]}" >/dev/null 2>&1
  stop "$name"
  [ "$answered" = "$MISSES" ] || { log "$name answered only $answered of $MISSES"; return 1; }
  instructions=$(cat "$work/cg-$name".* | awk '/^summary:/ {s += $2} END {print s + 0}')
  log "$name: $instructions instructions for $answered misses"
  if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP"
    cat "$work/cg-$name".1 >"$KEEP/$name"
  fi
  PER_MISS[$name]=$((instructions / answered))
}

declare -A PER_MISS
PORT[skyline]=$(free_port)
measure skyline skydns.local. "$SKYLINE_BIN" --records "$work/records.json" \
  --nameservers "127.0.0.1:${PORT[knot]}" --addr "127.0.0.1:${PORT[skyline]}" --workers 1 --no-pin
echo "instructions per cache miss, skyline: ${PER_MISS[skyline]}"
if [ "$PEERS" = dnsdist ]; then
  PORT[dnsdist]=$(free_port)
  dnsdist_conf "${PORT[dnsdist]}" "${PORT[knot]}" "$ZONE" "$work/dnsdist.conf"
  measure dnsdist "$ZONE." dnsdist --supervised --disable-syslog -C "$work/dnsdist.conf"
  echo "instructions per cache miss, dnsdist: ${PER_MISS[dnsdist]}"
  awk -v s="${PER_MISS[skyline]}" -v d="${PER_MISS[dnsdist]}" 'BEGIN {printf "skyline / dnsdist: %.2f\n", s / d}'
fi
