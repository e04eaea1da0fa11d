#!/usr/bin/env bash
# Cache-hit throughput: skyline answering names outside its zones from its response cache,
# against the echo ceiling (skyline-echo, no DNS work) and dnsdist's packet cache in front of
# the same upstream (Knot serving `* A` under bench.test.). Every server is warmed with the
# 1,000 names first; then skyline-loadgen drives each in turn, A/B/C, for ROUNDS rounds, and the
# median of the per-round ratios is printed: the forwarding issue's targets are skyline ≥ 0.95 ×
# echo and ≥ 1.1 × dnsdist.
#
# Usage: benches/cache_hits.sh
# Knobs (environment, defaults in brackets): ROUNDS [3], DURATION [5] seconds per run,
# CLIENT_CPU [0] (the load generator and Knot), SERVER_CPU [1] (skyline, echo, dnsdist),
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
echo '{"/skydns/local/skydns/node1": {"host": "10.0.0.1"}}' >"$work/records.json"

for name in knot skyline echo dnsdist; do PORT[$name]=$(free_port); done
knot_conf "${PORT[knot]}" "$ZONE." "$work/zone"
dnsdist_cache_conf "${PORT[dnsdist]}" "${PORT[knot]}" "$work/dnsdist.conf"

run_pinned knot "$CLIENT_CPU" knotd -c "$work/knot/knot.conf"
run_pinned skyline "$SERVER_CPU" target/release/skyline --records "$work/records.json" \
  --nameservers "127.0.0.1:${PORT[knot]}" --addr "127.0.0.1:${PORT[skyline]}" --workers 1 --no-pin
run_pinned echo "$SERVER_CPU" target/release/skyline-echo --addr "127.0.0.1:${PORT[echo]}"
run_pinned dnsdist "$SERVER_CPU" dnsdist --supervised --disable-syslog -C "$work/dnsdist.conf"
wait_ready knot "$ZONE." 10
wait_ready skyline "$ZONE." 10
wait_ready dnsdist "$ZONE." 10

for name in skyline dnsdist; do
  timeout 60 dnsperf -s 127.0.0.1 -p "${PORT[$name]}" -d "$work/hits.txt" -n 2 -c 1 -q 20 -t 2 >"$work/warm.$name" 2>&1
done

# Ratios per round (the three servers of a round ran seconds apart, under the same load), then
# their median, as benches/compare.sh does.
echo_ratios=""
dnsdist_ratios=""
for round in $(seq "$ROUNDS"); do
  declare -A QPS=()
  for name in echo skyline dnsdist; do
    qps=$(timeout $((DURATION + 30)) taskset -c "$CLIENT_CPU" "${prio[@]}" target/release/skyline-loadgen \
      -s "127.0.0.1:${PORT[$name]}" -d "$work/hits.txt" -l "$DURATION" -q 100 -b 16 2>&1 |
      grep -o 'qps=[0-9]*' | head -1 | cut -d= -f2)
    QPS[$name]=${qps:-0}
  done
  log "round $round: echo ${QPS[echo]}, skyline ${QPS[skyline]}, dnsdist ${QPS[dnsdist]} QPS"
  echo_ratios+="$(awk -v s="${QPS[skyline]}" -v o="${QPS[echo]}" 'BEGIN {printf "%.3f", o ? s / o : 0}') "
  dnsdist_ratios+="$(awk -v s="${QPS[skyline]}" -v o="${QPS[dnsdist]}" 'BEGIN {printf "%.3f", o ? s / o : 0}') "
done

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
echo "load average $(cut -d' ' -f1-3 /proc/loadavg); medians of the per-round ratios over $ROUNDS rounds:"
echo "skyline / echo $(echo "$echo_ratios" | median) (target >= 0.95; rounds $echo_ratios)"
echo "skyline / dnsdist $(echo "$dnsdist_ratios" | median) (target >= 1.1; rounds $dnsdist_ratios)"
