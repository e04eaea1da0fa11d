#!/usr/bin/env bash
# User-space instructions per cache hit: skyline under callgrind answering names outside its
# zones from its response cache. An upstream skyline serves the 1,025 `example.org.` names of
# `skyline-dataset --services 250`; the measured skyline forwards to it. Its cache is warmed
# with 1,000 of the names (one pass of misses, one of hits), the warm-up's upstream timers are
# left to fire (SETTLE seconds: the question budget is 1.5 s, and its timers would otherwise be
# counted against the hits that follow), then the counters are zeroed, HITS queries of the same
# names are sent once with `dnsperf -n 1 -c 1 -q 20`, and the instructions of the whole process
# are divided by the answered queries. The forwarding issue's target is 1,000.
#
# With ZONE_MIX set to a mix of `skyline-dataset` (a, srv, nxdomain, ...), the measured skyline
# also serves a zone of its own (`example.net.`, the same generator's data), and what is counted
# after the warm-up is HITS queries of that mix: the cost of an authoritative answer on a
# forwarding server whose cache holds replayable hits (`forward/replay.rs`), to compare with the
# same mix on a server without them (`benches/compare.sh callgrind`).
#
# Usage: benches/hit_instructions.sh
# Knobs (environment, defaults in brackets): HITS [10000], SETTLE [2] seconds, BUILD [1] (0: use
# the release binaries as they are), ZONE_MIX [unset].
#
# Everything listens on 127.0.0.1 only, every run is bounded in time, and every process this
# script starts is stopped when it exits.
set -euo pipefail
cd "$(dirname "$0")/.."

HITS="${HITS:-10000}"
ZONE_MIX="${ZONE_MIX:-}"
SETTLE="${SETTLE:-2}"
BUILD="${BUILD:-1}"

# shellcheck source=benches/lib.sh
source benches/lib.sh

scripts/setup.sh bench
if [ "$BUILD" = 1 ]; then
  cargo build --release --locked -p skyline -p skyline-bench --bins >&2
fi

target/release/skyline-dataset --out "$work/data" --domain example.org --services 250 --queries 2000 >/dev/null
head -n 1000 "$work/data/a.txt" >"$work/warm.txt"
awk -v n="$HITS" '{line[NR] = $0} END {for (i = 0; i < n; i++) print line[i % NR + 1]}' "$work/warm.txt" >"$work/hits.txt"
zone=()
if [ -n "$ZONE_MIX" ]; then
  target/release/skyline-dataset --out "$work/zone" --domain example.net --services 250 --queries "$HITS" >/dev/null
  [ -f "$work/zone/$ZONE_MIX.txt" ] || { log "no mix $ZONE_MIX"; exit 1; }
  awk -v n="$HITS" '{line[NR] = $0} END {for (i = 0; i < n; i++) print line[i % NR + 1]}' "$work/zone/$ZONE_MIX.txt" >"$work/hits.txt"
  zone=(--records "$work/zone/records.json")
fi
domain=skydns.local.
[ -n "$ZONE_MIX" ] && domain=example.net.

PORT[upstream]=$(free_port)
PORT[skyline]=$(free_port)
target/release/skyline --records "$work/data/records.json" --domain example.org. \
  --addr "127.0.0.1:${PORT[upstream]}" --workers 1 --no-pin >"$work/upstream.log" 2>&1 &
PID[upstream]=$!
valgrind --tool=callgrind --callgrind-out-file="$work/cg" target/release/skyline --domain "$domain" "${zone[@]}" \
  --nameservers "127.0.0.1:${PORT[upstream]}" --addr "127.0.0.1:${PORT[skyline]}" --workers 1 --no-pin \
  >"$work/skyline.log" 2>&1 &
PID[skyline]=$!
wait_ready upstream example.org. 10
wait_ready skyline "$domain" 120

query() { # file: sends it once, prints how many queries were answered
  dnsperf -s 127.0.0.1 -p "${PORT[skyline]}" -d "$1" -n 1 -c 1 -q 20 -t 5 | awk '/Queries completed:/ {print $3}'
}
query "$work/warm.txt" >/dev/null
warm=$(query "$work/warm.txt")
[ "$warm" = 1000 ] || { log "only $warm of the 1000 warm-up names were answered"; exit 1; }
# The zone's answers are asked once before they are counted, as compare.sh warms its mixes.
[ -n "$ZONE_MIX" ] && query "$work/hits.txt" >/dev/null
sleep "$SETTLE"
callgrind_control -z "${PID[skyline]}" >/dev/null 2>&1
answered=$(query "$work/hits.txt")
callgrind_control -d "${PID[skyline]}" >/dev/null 2>&1
instructions=$(cat "$work"/cg.* | awk '/^summary:/ {s += $2} END {print s + 0}')
what="cache hit"
[ -n "$ZONE_MIX" ] && what="$ZONE_MIX answer beside replayable hits"
log "$instructions instructions for $answered answers"
awk -v i="$instructions" -v n="$answered" -v what="$what" 'BEGIN {if (n > 0) printf "instructions per %s: %.0f\n", what, i / n}'
