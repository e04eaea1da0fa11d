#!/usr/bin/env bash
# User-space instructions per cache miss and per cache hit: skyline under callgrind answering
# names outside its zones, first by forwarding them, then from its response cache. An upstream
# skyline serves the 1,230 `example.org.` names of `skyline-dataset --services 300`; the
# measured skyline forwards to it. The misses: after 20 names that teach it the upstream's
# round-trip time (and SETTLE seconds), 1,000 other names are sent once, each a miss,
# the upstream timers of their questions are left to fire (SETTLE seconds: the question budget
# is 1.5 s), and the instructions of the whole process from the first query to then are divided
# by the answered queries. The hits: the same names are sent again (every one a hit), then the
# counters are zeroed, HITS queries of the same names are sent once with
# `dnsperf -n 1 -c 1 -q 20`, and the instructions are divided likewise. The forwarding issue's
# target for a hit is 1,000.
#
# Usage: benches/hit_instructions.sh
# Knobs (environment, defaults in brackets): HITS [10000], SETTLE [2] seconds, BUILD [1] (0: use
# the release binaries as they are), KEEP [none] (a directory to keep the callgrind files `miss`
# and `hit` in, for `callgrind_annotate`).
#
# Everything listens on 127.0.0.1 only, every run is bounded in time, and every process this
# script starts is stopped when it exits.
set -euo pipefail
cd "$(dirname "$0")/.."

HITS="${HITS:-10000}"
SETTLE="${SETTLE:-2}"
BUILD="${BUILD:-1}"

# shellcheck source=benches/lib.sh
source benches/lib.sh

scripts/setup.sh bench
if [ "$BUILD" = 1 ]; then
  cargo build --release --locked -p skyline -p skyline-bench --bins >&2
fi

target/release/skyline-dataset --out "$work/data" --domain example.org --services 300 --queries 20000 >/dev/null
# 1,000 different names: each is a miss the first time it is asked; 20 others to ask before
# counting, so that the misses counted are those of a server that knows its upstream's
# round-trip time (until it does, its tries wait longer, and their timers come out of order).
awk '!seen[$0]++' "$work/data/a.txt" >"$work/names.txt"
head -n 1000 "$work/names.txt" >"$work/warm.txt"
sed -n 1001,1020p "$work/names.txt" >"$work/settle.txt"
[ "$(wc -l <"$work/settle.txt")" = 20 ] || { log "the dataset has fewer than 1020 names"; exit 1; }
awk -v n="$HITS" '{line[NR] = $0} END {for (i = 0; i < n; i++) print line[i % NR + 1]}' "$work/warm.txt" >"$work/hits.txt"

PORT[upstream]=$(free_port)
PORT[skyline]=$(free_port)
target/release/skyline --records "$work/data/records.json" --domain example.org. \
  --addr "127.0.0.1:${PORT[upstream]}" --workers 1 --no-pin >"$work/upstream.log" 2>&1 &
PID[upstream]=$!
valgrind --tool=callgrind --callgrind-out-file="$work/cg" target/release/skyline --domain skydns.local. \
  --nameservers "127.0.0.1:${PORT[upstream]}" --addr "127.0.0.1:${PORT[skyline]}" --workers 1 --no-pin \
  >"$work/skyline.log" 2>&1 &
PID[skyline]=$!
wait_ready upstream example.org. 10
wait_ready skyline skydns.local. 120

query() { # file: sends it once, prints how many queries were answered
  dnsperf -s 127.0.0.1 -p "${PORT[skyline]}" -d "$1" -n 1 -c 1 -q 20 -t 5 | awk '/Queries completed:/ {print $3}'
}
counted() { # what: zeroes the counters, runs the rest of the command line, dumps them to $work/what
  local what=$1
  shift
  callgrind_control -z "${PID[skyline]}" >/dev/null 2>&1
  "$@"
  callgrind_control -d "${PID[skyline]}" >/dev/null 2>&1
  mv "$(ls -t "$work"/cg.* | head -n 1)" "$work/$what"
}
report() { # what answered: prints the instructions per answered query
  local instructions
  instructions=$(awk '/^summary:/ {s += $2} END {print s + 0}' "$work/$1")
  log "cache ${1}: $instructions instructions for $2 answered queries"
  awk -v i="$instructions" -v n="$2" -v what="$1" 'BEGIN {if (n > 0) printf "instructions per cache %s: %.0f\n", what, i / n}'
}
misses() {
  missed=$(query "$work/warm.txt")
  sleep "$SETTLE"
}
hits() { hit=$(query "$work/hits.txt"); }

query "$work/settle.txt" >/dev/null
sleep "$SETTLE"
counted miss misses
[ "$missed" = 1000 ] || { log "only $missed of the 1000 names were answered"; exit 1; }
warm=$(query "$work/warm.txt")
[ "$warm" = 1000 ] || { log "only $warm of the 1000 warm names were answered"; exit 1; }
sleep "$SETTLE"
counted hit hits
report miss "$missed"
report hit "$hit"
if [ -n "${KEEP:-}" ]; then
  mkdir -p "$KEEP"
  cp "$work/miss" "$work/hit" "$KEEP/"
fi
