#!/usr/bin/env bash
# Cache hits on a node-local cache: `skyline node-cache` running the node-local-dns ConfigMap of
# deploy/node-local/nodelocaldns.yaml as node-cache runs it (its template filled, the kube-dns
# ConfigMap's upstreamNameservers naming the upstream) against node-cache's shape run by dnsdist
# (packet cache) and by Unbound (forwarding everything, 30 s cap as the ConfigMap's `cache 30`),
# each forwarding to Knot serving `* A` under bench.test., each on one CPU. There is no CoreDNS
# package here to run node-cache itself; benches/results/node_cache/README.md records its
# published figures. The 1,000 names are warmed first; then skyline-loadgen drives each server in
# turn for ROUNDS rounds, and the medians of QPS and p99 latency are printed with the per-round
# ratios.
#
# Usage: benches/node_cache.sh
# Knobs (environment, defaults in brackets): ROUNDS [3], DURATION [5] seconds per run,
# CLIENT_CPU [0] (the load generator and Knot), SERVER_CPU [1] (the three caches),
# BUILD [1] (0: use the release binaries as they are).
#
# Everything listens on 127.0.0.1 only (the node-cache's -localip too, with -setupinterface=false
# and -setupiptables=false), every run is bounded in time, and every process this script starts
# is stopped when it exits.
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

for name in knot skyline dnsdist unbound metrics health; do PORT[$name]=$(free_port); done
knot_conf "${PORT[knot]}" "$ZONE." "$work/zone"

# The ConfigMap's Corefile as the installation leaves it (cluster.local, the local address, no
# second address), its metrics and health ports moved off the well-known ones.
awk '/^  Corefile: \|/ {on = 1; next} on && /^[^ ]/ {on = 0} on {sub(/^    /, ""); print}' \
  deploy/node-local/nodelocaldns.yaml |
  sed -e 's/__PILLAR__DNS__DOMAIN__/cluster.local/g' -e 's/__PILLAR__LOCAL__DNS__/127.0.0.1/g' \
    -e 's/__PILLAR__DNS__SERVER__//g' -e "s/:9253/:${PORT[metrics]}/" -e "s/:8080/:${PORT[health]}/" \
    >"$work/Corefile.base"
mkdir -p "$work/kube-dns"
echo "[\"127.0.0.1:${PORT[knot]}\"]" >"$work/kube-dns/upstreamNameservers"

dnsdist_cache_conf "${PORT[dnsdist]}" "${PORT[knot]}" "$work/dnsdist.conf" "10000, {maxTTL=30}"
cat >"$work/unbound.conf" <<CONF
server:
  interface: 127.0.0.1@${PORT[unbound]}
  num-threads: 1
  do-daemonize: no
  use-syslog: no
  logfile: ""
  chroot: ""
  username: ""
  pidfile: ""
  directory: "$work"
  access-control: 127.0.0.0/8 allow
  do-not-query-localhost: no
  module-config: "iterator"
  cache-max-ttl: 30
  qname-minimisation: no
remote-control:
  control-enable: no
forward-zone:
  name: "."
  forward-addr: 127.0.0.1@${PORT[knot]}
CONF

run_pinned knot "$CLIENT_CPU" knotd -c "$work/knot/knot.conf"
# The cluster DNS address fills __PILLAR__CLUSTER__DNS__ (cluster.local, not asked here).
KUBE_DNS_UPSTREAM_SERVICE_HOST=127.0.0.2 run_pinned skyline "$SERVER_CPU" target/release/skyline node-cache \
  -localip 127.0.0.1 -dns.port "${PORT[skyline]}" -setupinterface=false -setupiptables=false \
  -upstreamsvc kube-dns-upstream -basecorefile "$work/Corefile.base" -conf "$work/Corefile" \
  -kubednscm "$work/kube-dns" -pidfile "$work/node-cache.pid"
run_pinned dnsdist "$SERVER_CPU" dnsdist --supervised --disable-syslog -C "$work/dnsdist.conf"
run_pinned unbound "$SERVER_CPU" unbound -d -c "$work/unbound.conf"
for name in knot skyline dnsdist unbound; do wait_ready "$name" "$ZONE." 10; done

for name in skyline dnsdist unbound; do
  timeout 60 dnsperf -s 127.0.0.1 -p "${PORT[$name]}" -d "$work/hits.txt" -n 2 -c 1 -q 20 -t 2 >"$work/warm.$name" 2>&1
done

measure() { # name: "QPS P99_MS" over DURATION seconds of cache hits
  timeout $((DURATION + 30)) taskset -c "$CLIENT_CPU" "${prio[@]}" target/release/skyline-loadgen \
    -s "127.0.0.1:${PORT[$1]}" -d "$work/hits.txt" -l "$DURATION" -q 100 -b 16 2>&1 |
    awk '/queries per second/ {q = $(NF - 3)} /latency ms:/ {for (i = 1; i < NF; i++) if ($i == "p99") p = $(i + 1)}
         END {printf "%d %s\n", q, p}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b ? a / b : 0}'; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

declare -A QPS_ALL P99_ALL
vs_dnsdist="" vs_unbound=""
for round in $(seq "$ROUNDS"); do
  declare -A QPS=() P99=()
  for name in skyline dnsdist unbound; do
    read -r QPS[$name] P99[$name] < <(measure "$name")
    QPS_ALL[$name]+="${QPS[$name]} "
    P99_ALL[$name]+="${P99[$name]} "
  done
  log "round $round: QPS (p99 ms) skyline node-cache ${QPS[skyline]} (${P99[skyline]})," \
    "dnsdist ${QPS[dnsdist]} (${P99[dnsdist]}), unbound ${QPS[unbound]} (${P99[unbound]})"
  vs_dnsdist+="$(ratio "${QPS[skyline]}" "${QPS[dnsdist]}") "
  vs_unbound+="$(ratio "${QPS[skyline]}" "${QPS[unbound]}") "
done

echo "load average $(cut -d' ' -f1-3 /proc/loadavg); medians over $ROUNDS rounds of $DURATION s, cache hits:"
for name in skyline dnsdist unbound; do
  echo "$name: $(echo "${QPS_ALL[$name]}" | median) QPS, p99 $(echo "${P99_ALL[$name]}" | median) ms (rounds: ${QPS_ALL[$name]}QPS; ${P99_ALL[$name]}ms)"
done
echo "QPS skyline node-cache / dnsdist $(echo "$vs_dnsdist" | median) (rounds $vs_dnsdist); / unbound $(echo "$vs_unbound" | median) (rounds $vs_unbound)"
