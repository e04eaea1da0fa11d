#!/usr/bin/env bash
# What the Corefile front end costs: skyline started from a Corefile against skyline started with
# the same settings as flags, on cache hits (1,000 names, warmed) and cache misses (a name never
# asked before, each forwarded to Knot serving `* A` under bench.test.), with dnsdist (packet cache
# in front of the same Knot) beside them. The servers of a round run seconds apart under the same
# load; the median of the per-round ratios is printed. The front end runs once, at start: the
# ratios should be 1 within the noise.
#
# Usage: benches/corefile.sh
# Knobs (environment, defaults in brackets): ROUNDS [3], DURATION [5] seconds per run,
# CLIENT_CPU [0] (the load generator and Knot), SERVER_CPU [1] (skyline, dnsdist),
# BUILD [1] (0: use the release binaries as they are).
#
# Everything listens on 127.0.0.1 only, every run is bounded in time, and every process this
# script starts is stopped when it exits.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-5}"
CLIENT_CPU="${CLIENT_CPU:-0}"
SERVER_CPU="${SERVER_CPU:-1}"
BUILD="${BUILD:-1}"
ZONE=bench.test

# shellcheck source=benches/lib.sh
source benches/lib.sh

scripts/setup.sh bench
if [ "$BUILD" = 1 ]; then
  cargo build --release --locked -p skyline -p skyline-bench --bins >&2
fi

wildcard_zone "$ZONE" "$work/zone"
awk -v z="$ZONE" 'BEGIN {for (i = 1; i <= 1000; i++) printf "n%04d.%s A\n", i, z}' >"$work/hits.txt"

for name in knot flags corefile dnsdist; do PORT[$name]=$(free_port); done
knot_conf "${PORT[knot]}" "$ZONE." "$work/zone"
dnsdist_cache_conf "${PORT[dnsdist]}" "${PORT[knot]}" "$work/dnsdist.conf"
# The kubeadm shape, less what needs a cluster: errors, cache 30, loadbalance, forward.
cat >"$work/Corefile" <<CONF
.:${PORT[corefile]} {
    bind 127.0.0.1
    errors
    forward . 127.0.0.1:${PORT[knot]}
    cache 30
    loadbalance
}
CONF

run_pinned knot "$CLIENT_CPU" knotd -c "$work/knot/knot.conf"
run_pinned flags "$SERVER_CPU" target/release/skyline --addr "127.0.0.1:${PORT[flags]}" \
  --nameservers "127.0.0.1:${PORT[knot]}" --cache-max-ttl 30 --cache-negative-ttl 30 \
  --no-prefetch --serve-stale 0 --workers 1 --no-pin
run_pinned corefile "$SERVER_CPU" target/release/skyline --corefile "$work/Corefile" --workers 1 --no-pin
run_pinned dnsdist "$SERVER_CPU" dnsdist --supervised --disable-syslog -C "$work/dnsdist.conf"
for name in knot flags corefile dnsdist; do wait_ready "$name" "$ZONE." 10; done

for name in flags corefile dnsdist; do
  timeout 60 dnsperf -s 127.0.0.1 -p "${PORT[$name]}" -d "$work/hits.txt" -n 2 -c 1 -q 20 -t 2 >"$work/warm.$name" 2>&1
done

qps() { # name, query file
  timeout $((DURATION + 30)) taskset -c "$CLIENT_CPU" "${prio[@]}" target/release/skyline-loadgen \
    -s "127.0.0.1:${PORT[$1]}" -d "$2" -l "$DURATION" -q 100 -b 16 2>&1 |
    grep -o 'qps=[0-9]*' | head -1 | cut -d= -f2
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b ? a / b : 0}'; }
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

hit_front="" hit_dnsdist="" miss_front="" miss_dnsdist=""
for round in $(seq "$ROUNDS"); do
  declare -A HIT=() MISS=()
  for name in flags corefile dnsdist; do
    HIT[$name]=$(qps "$name" "$work/hits.txt")
    # Names never asked before: every query a miss, forwarded.
    awk -v z="$ZONE" -v r="$round" -v s="$name" \
      'BEGIN {for (i = 1; i <= 1500000; i++) printf "m%d-%s-%d.%s A\n", i, s, r, z}' >"$work/misses.txt"
    MISS[$name]=$(qps "$name" "$work/misses.txt")
  done
  log "round $round: hits flags ${HIT[flags]} corefile ${HIT[corefile]} dnsdist ${HIT[dnsdist]};" \
    "misses flags ${MISS[flags]} corefile ${MISS[corefile]} dnsdist ${MISS[dnsdist]} QPS"
  hit_front+="$(ratio "${HIT[corefile]}" "${HIT[flags]}") "
  hit_dnsdist+="$(ratio "${HIT[corefile]}" "${HIT[dnsdist]}") "
  miss_front+="$(ratio "${MISS[corefile]}" "${MISS[flags]}") "
  miss_dnsdist+="$(ratio "${MISS[corefile]}" "${MISS[dnsdist]}") "
done

echo "load average $(cut -d' ' -f1-3 /proc/loadavg); medians of the per-round ratios over $ROUNDS rounds:"
echo "cache hits: corefile / flags $(echo "$hit_front" | median) (rounds $hit_front); corefile / dnsdist $(echo "$hit_dnsdist" | median) (rounds $hit_dnsdist)"
echo "cache misses: corefile / flags $(echo "$miss_front" | median) (rounds $miss_front); corefile / dnsdist $(echo "$miss_dnsdist" | median) (rounds $miss_dnsdist)"
