#!/usr/bin/env bash
# Whole-server throughput: skyline against Knot DNS on the same data, in the same run.
#
# Both servers get one UDP worker pinned to one core (SERVER_CPU); dnsperf runs on the other
# (CLIENT_CPU). Runs alternate A/B/A/B ROUNDS times; the script prints every run, the medians and
# the ratio skyline/knot. Usage: benches/dnsperf.sh [ROUNDS] (default 3). Needs root for chrt;
# without it the runs go unprioritised and drift more.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS="${1:-3}"
SERVER_CPU="${SERVER_CPU:-1}"
CLIENT_CPU="${CLIENT_CPU:-0}"
SERVICES="${SERVICES:-1000}"   # services of 10 instances each
DURATION="${DURATION:-10}"
NXDOMAIN_EVERY="${NXDOMAIN_EVERY:-10}"  # one query in N is for a missing name

scripts/setup.sh bench
cargo build --release --locked --bin skyline >/dev/null

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000))
}

# The same data for both: SkyDNS records for skyline, a zone file for Knot.
awk -v n="$SERVICES" -v every="$NXDOMAIN_EVERY" -v dir="$work" 'BEGIN {
  rec = dir "/records.json"; zone = dir "/skydns.local.zone"; q = dir "/queries"
  printf "{\n" > rec
  printf "$ORIGIN skydns.local.\n$TTL 3600\n@ SOA ns.dns.skydns.local. hostmaster.skydns.local. 1 28800 7200 604800 60\n@ NS ns1.ns.dns\nns1.ns.dns A 10.255.0.1\n" > zone
  printf "\"/skydns/local/skydns/dns/ns/ns1\": {\"host\": \"10.255.0.1\"}" > rec
  for (s = 0; s < n; s++) for (h = 0; h < 10; h++) {
    i = s * 10 + h; ip = sprintf("10.%d.%d.%d", int(i / 65536) % 256, int(i / 256) % 256, i % 256)
    printf ",\n\"/skydns/local/skydns/svc%d/h%d\": {\"host\": \"%s\"}", s, h, ip > rec
    printf "h%d.svc%d A %s\nsvc%d A %s\n", h, s, ip, s, ip > zone
  }
  printf "\n}\n" > rec
  srand(42)
  for (k = 0; k < 100000; k++) {
    s = int(rand() * n); h = int(rand() * 10)
    if (k % every == 0) printf "h%d.nope%d.skydns.local A\n", h, s > q
    else printf "h%d.svc%d.skydns.local A\n", h, s > q
  }
}'

prio=()
if [ "$(id -u)" -eq 0 ] && command -v chrt >/dev/null; then prio=(chrt -f 1); fi

wait_udp() {  # port
  for _ in $(seq 100); do
    dig +time=1 +tries=1 @127.0.0.1 -p "$1" skydns.local SOA >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "server on port $1 did not answer" >&2; return 1
}

start_skyline() {
  port=$(free_port)
  "${prio[@]}" taskset -c "$SERVER_CPU" target/release/skyline --records "$work/records.json" \
    --domain skydns.local. --addr "127.0.0.1:$port" --workers 1 --no-pin 2>"$work/skyline.log" &
  pids+=($!); server_pid=$!
  wait_udp "$port"
}

start_knot() {
  port=$(free_port)
  mkdir -p "$work/knot"
  cat >"$work/knot.conf" <<CONF
server:
    listen: 127.0.0.1@$port
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
    rundir: $work/knot
database:
    storage: $work/knot
log:
  - target: stderr
    any: warning
zone:
  - domain: skydns.local
    file: $work/skydns.local.zone
CONF
  "${prio[@]}" taskset -c "$SERVER_CPU" knotd -c "$work/knot.conf" 2>"$work/knot.log" &
  pids+=($!); server_pid=$!
  wait_udp "$port"
  # Knot pins its UDP worker itself: move every thread back onto the server core.
  taskset -a -p -c "$SERVER_CPU" "$server_pid" >/dev/null
}

run_dnsperf() {  # label
  "${prio[@]}" taskset -c "$CLIENT_CPU" dnsperf -s 127.0.0.1 -p "$port" -d "$work/queries" \
    -l "$DURATION" -c 10 -T 1 -q 100 -t 2 >"$work/dnsperf.out" 2>&1
  qps=$(awk '/Queries per second/ {print $4}' "$work/dnsperf.out")
  lost=$(awk '/Queries lost/ {print $3}' "$work/dnsperf.out")
  avg=$(awk '/Average Latency/ {print $4}' "$work/dnsperf.out")
  printf '%-8s qps=%-10s lost=%-6s avg_latency_s=%s\n' "$1" "$qps" "$lost" "$avg"
  echo "$qps" >>"$work/$1.qps"
}

stop_server() { kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; }

for r in $(seq "$ROUNDS"); do
  start_skyline; run_dnsperf skyline; stop_server
  start_knot; run_dnsperf knot; stop_server
done

median() { sort -g "$1" | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
s=$(median "$work/skyline.qps"); k=$(median "$work/knot.qps")
echo "median qps: skyline=$s knot=$k"
awk -v s="$s" -v k="$k" 'BEGIN { printf "ratio skyline/knot = %.2f\n", s / k }'
