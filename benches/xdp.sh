#!/usr/bin/env bash
# Flood harness on a veth pair: skyline over AF_XDP and on kernel sockets against Knot DNS in
# XDP mode and on kernel sockets, all serving the same data, flooded open-loop by kxdpgun (Knot's
# XDP generator, Debian's knot-dnsutils) from another network namespace. Method and numbers:
# tuning.md and benches/results/xdp/README.md.
#
# Usage: benches/xdp.sh [all|flood|callgrind|report]     (default: all)
#   flood      for each round and rate: every server in turn (the order reversed every other
#              round), each started alone on 192.0.2.1:53 in the server namespace, warmed up,
#              flooded for DURATION seconds, then stopped; per leg kxdpgun's sent and answered
#              counts, the server namespace's UDP counters, both veth ends' drop counters,
#              skyline's /metrics and the load average go to RESULTS/runs.csv
#   callgrind  user-space instructions per answer of each server under valgrind, flooded at
#              CALLGRIND_RATE for CALLGRIND_SECONDS
#   report     RESULTS/summary.md (medians, ratios, targets) and RESULTS/xdp.svg from what is in
#              RESULTS
#   all        flood, callgrind, report
#
# Knobs (environment, defaults in brackets): ROUNDS [3], DURATION [10] seconds per leg, RATES
# ["150000 2000000"] kxdpgun queries per second (open loop), KXDPGUN_BATCH [10], SERVERS ["skyline-xdp
# skyline knot-xdp knot"], FAMILY [4] (6: flood the servers' IPv6 ULA address), SERVICES [2500],
# QUERIES [100000], SERVER_CPU [1], CLIENT_CPU [0], SKYLINE_BIN [target/release/skyline],
# SKYLINE_FLAGS ["--workers 1 --no-pin"], XDP_FLAGS [""] (more flags for skyline-xdp, e.g.
# "--xdp-mode native"), CALLGRIND_RATE [2000], CALLGRIND_SECONDS [5], BUILD [1] (0: use the
# binaries as they are), RESULTS [benches/results/xdp], PRIORITY [1] (0: the servers at
# normal priority; 1: as root, at real-time priority, chrt -f 1), CLIENT_PRIORITY [1] (0: the
# generator at normal priority while the servers keep PRIORITY's; see "The generator's
# priority" below), RPS [0] (1:
# the server namespace's kernel receive path on SERVER_CPU instead of the generator's core),
# CLIENT_NAPI [0] (1: the generator's receive of the replies on CLIENT_CPU, in a NAPI thread
# above kxdpgun's priority, instead of on the server's core), GENERATOR [kxdpgun] (flood:
# skyline-flood on a kernel UDP socket in the client namespace instead, for a kernel whose
# verifier refuses kxdpgun's XDP program; the server side of the wire is the same).
# A quick look: ROUNDS=1 DURATION=3 SERVERS="skyline knot" benches/xdp.sh flood
#
# Needs root (network namespaces, XDP). The two namespaces, joined by a veth pair with two
# receive and two transmit queues on each end, hold only private addresses (192.0.2.0/24 and a
# ULA prefix) and no route anywhere else; they and every process this script starts are removed
# when it exits. The kernel sends on transmit queue 0 of both ends (XPS): kxdpgun and Knot bind
# one AF_XDP socket, to queue 0, because a veth reports no combined channels, and a reply sent
# on queue 1 would reach the generator's XDP program on a queue no socket reads.
#
# The generator's priority: a generator spins on its core, and a task at real-time priority that
# never sleeps is stopped by the kernel for 40-54 ms once a second whenever a normal task waits
# on that core (Linux 6.12 and later: the fair server); at normal priority it shares the core
# with that task instead (`perf sched`, benches/results/xdp/README.md). kxdpgun sends the
# queries it owes after a stop at once: a burst of up to 8,000 at 150,000 q/s, more than a
# server's receive ring holds. Only two otherwise idle cores give a steady offered load.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE="${1:-all}"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-10}"
RATES="${RATES:-150000 2000000}"
KXDPGUN_BATCH="${KXDPGUN_BATCH:-10}"
SERVERS="${SERVERS:-skyline-xdp skyline knot-xdp knot}"
FAMILY="${FAMILY:-4}"
SERVICES="${SERVICES:-2500}"
QUERIES="${QUERIES:-100000}"
SERVER_CPU="${SERVER_CPU:-1}"
CLIENT_CPU="${CLIENT_CPU:-0}"
SKYLINE_BIN="${SKYLINE_BIN:-target/release/skyline}"
SKYLINE_FLAGS="${SKYLINE_FLAGS---workers 1 --no-pin}"
XDP_FLAGS="${XDP_FLAGS:-}"
CALLGRIND_RATE="${CALLGRIND_RATE:-2000}"
CALLGRIND_SECONDS="${CALLGRIND_SECONDS:-5}"
BUILD="${BUILD:-1}"
RESULTS="${RESULTS:-benches/results/xdp}"
PRIORITY="${PRIORITY:-1}"
RPS="${RPS:-0}"
CLIENT_NAPI="${CLIENT_NAPI:-0}"
CLIENT_PRIORITY="${CLIENT_PRIORITY:-1}"
GENERATOR="${GENERATOR:-kxdpgun}"
DOMAIN=skydns.local
BIN=target/release

case "$MODE" in all | flood | callgrind | report) ;; *)
  sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
  exit 2
  ;;
esac

# shellcheck source=benches/lib.sh
source benches/lib.sh
tick=$(getconf CLK_TCK)
cprio=("${prio[@]}")
[ "$PRIORITY" = 1 ] || prio=()
[ "$CLIENT_PRIORITY" = 1 ] || cprio=()

NS_S="skyline-xdp-srv-$$"
NS_C="skyline-xdp-cli-$$"
IF_S=veth-srv
IF_C=veth-cli
V4_S=192.0.2.1
V4_C=192.0.2.2
V6_S=fd53:6b79::1
V6_C=fd53:6b79::2
HTTP=127.0.0.1:8053
if [ "$FAMILY" = 6 ]; then TARGET=$V6_S; else TARGET=$V4_S; fi

teardown() {
  ip netns del "$NS_S" 2>/dev/null || true
  ip netns del "$NS_C" 2>/dev/null || true
}
trap 'cleanup; teardown' EXIT

in_s() { ip netns exec "$NS_S" "$@"; }
in_c() { ip netns exec "$NS_C" "$@"; }

# The two namespaces and the veth pair between them, with static neighbour entries (kxdpgun
# takes the peer's MAC address from the neighbour table) and every transmit on queue 0.
network() {
  ip netns add "$NS_S"
  ip netns add "$NS_C"
  ip link add "$IF_S" numrxqueues 2 numtxqueues 2 netns "$NS_S" type veth \
    peer name "$IF_C" numrxqueues 2 numtxqueues 2 netns "$NS_C"
  local ns dev addr4 addr6
  for ns in "$NS_S" "$NS_C"; do
    if [ "$ns" = "$NS_S" ]; then dev=$IF_S addr4=$V4_S addr6=$V6_S; else dev=$IF_C addr4=$V4_C addr6=$V6_C; fi
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$addr4/24" dev "$dev"
    ip -n "$ns" addr add "$addr6/64" dev "$dev" nodad
    ip -n "$ns" link set "$dev" up
    ip netns exec "$ns" sh -c "echo ffffffff > /sys/class/net/$dev/queues/tx-0/xps_cpus 2>/dev/null ||
      echo 3 > /sys/class/net/$dev/queues/tx-0/xps_cpus; echo 0 > /sys/class/net/$dev/queues/tx-1/xps_cpus"
  done
  # With RPS=1, the server's kernel receive path (IP, UDP, the socket queue) runs on the
  # server's core, as a NIC's interrupts would have it; by default a veth runs it on the sending
  # core, the generator's.
  if [ "$RPS" = 1 ]; then
    local mask rx
    mask=$(printf '%x' $((1 << SERVER_CPU)))
    for rx in 0 1; do in_s sh -c "echo $mask > /sys/class/net/$IF_S/queues/rx-$rx/rps_cpus"; done
  fi
  # With CLIENT_NAPI=1, the generator's receive of the replies (its XDP program, the copy into
  # its UMEM) runs in NAPI threads on the generator's core, as on a second machine; by default
  # a veth runs it on the sending core, the server's. GRO on gives the veth its NAPI instances
  # before kxdpgun attaches its program, so that they can be made threads and pinned once.
  if [ "$CLIENT_NAPI" = 1 ]; then
    local napi
    in_c ethtool -K "$IF_C" gro on >/dev/null
    in_c sh -c "echo 1 > /sys/class/net/$IF_C/threaded"
    for napi in $(pgrep "^napi/$IF_C-"); do
      taskset -p -c "$CLIENT_CPU" "$napi" >/dev/null
      if [ ${#prio[@]} -gt 0 ]; then chrt -f -p 2 "$napi"; fi
    done
  fi
  local mac_s mac_c
  mac_s=$(in_s cat "/sys/class/net/$IF_S/address")
  mac_c=$(in_c cat "/sys/class/net/$IF_C/address")
  ip -n "$NS_C" neigh replace "$V4_S" lladdr "$mac_s" dev "$IF_C" nud permanent
  ip -n "$NS_C" neigh replace "$V6_S" lladdr "$mac_s" dev "$IF_C" nud permanent
  ip -n "$NS_S" neigh replace "$V4_C" lladdr "$mac_c" dev "$IF_S" nud permanent
  ip -n "$NS_S" neigh replace "$V6_C" lladdr "$mac_c" dev "$IF_S" nud permanent
  log "namespaces $NS_S ($IF_S $V4_S $V6_S) and $NS_C ($IF_C $V4_C $V6_C)"
}

prepare() {
  [ "$MODE" = report ] && { mkdir -p "$RESULTS"; return 0; }
  if [ "$(id -u)" -ne 0 ]; then log "needs root: network namespaces and XDP"; exit 1; fi
  scripts/setup.sh bench
  if [ "$GENERATOR" = kxdpgun ]; then
    command -v kxdpgun >/dev/null || [ -x /usr/sbin/kxdpgun ] || { log "kxdpgun missing (Debian package knot-dnsutils)"; exit 1; }
  fi
  if [ "$BUILD" = 1 ]; then
    log "building release binaries"
    cargo build --release --locked -p skyline -p skyline-bench --bins >&2
  fi
  "$BIN/skyline-dataset" --out "$work/data" --domain "$DOMAIN" --services "$SERVICES" --queries "$QUERIES" >&2
  mkdir -p "$RESULTS"
  network
}

knot_config() { # xdp: 1 to serve through Knot's XDP program on the server's veth
  mkdir -p "$work/knot"
  {
    echo "server:"
    echo "    listen: [ $V4_S@53, $V6_S@53 ]"
    echo "    udp-workers: 1"
    echo "    tcp-workers: 1"
    echo "    background-workers: 1"
    echo "    rundir: $work/knot"
    if [ "$1" = 1 ]; then
      echo "xdp:"
      echo "    listen: $IF_S@53"
      echo "    udp: on"
    fi
    echo "database:"
    echo "    storage: $work/knot"
    echo "log:"
    echo "  - target: stderr"
    echo "    any: warning"
    echo "zone:"
    echo "  - domain: $DOMAIN."
    echo "    file: $work/data/$DOMAIN.zone"
  } >"$work/knot/knot.conf"
}

# The command line of a server; empty (with the reason logged) when this build cannot run it.
server_line() { # name
  local skyline="$SKYLINE_BIN --records $work/data/records.json --domain $DOMAIN. --addr $V4_S:53,[$V6_S]:53 --no-rec --http-addr $HTTP $SKYLINE_FLAGS"
  case "$1" in
  skyline) echo "$skyline" ;;
  skyline-xdp)
    if ! "$SKYLINE_BIN" --help 2>&1 | grep -q -- '--xdp '; then
      log "skyline-xdp: $SKYLINE_BIN has no --xdp flag (a build without the AF_XDP backend)"
      return 1
    fi
    echo "$skyline --xdp $IF_S $XDP_FLAGS"
    ;;
  knot) knot_config 0; echo "knotd -c $work/knot/knot.conf" ;;
  knot-xdp) knot_config 1; echo "knotd -c $work/knot/knot.conf" ;;
  *) log "unknown server $1"; return 1 ;;
  esac
}

# Starts one server in the server namespace on SERVER_CPU, run by the wrapper if any, and waits
# until it answers from the client namespace.
serve() { # name seconds [wrapper...]
  local name=$1 seconds=$2 line
  shift 2
  line=$(server_line "$name") || return 1
  # shellcheck disable=SC2086 # the command line is split on purpose
  taskset -c "$SERVER_CPU" ip netns exec "$NS_S" "$@" $line >"$work/$name.log" 2>&1 &
  PID[$name]=$!
  local tries=$((seconds * 4))
  for _ in $(seq "$tries"); do
    if ! kill -0 "${PID[$name]}" 2>/dev/null; then
      log "$name exited early:"; tail -20 "$work/$name.log" >&2; unset "PID[$name]"; return 1
    fi
    if in_c dig +time=1 +tries=1 +norec @"$TARGET" "$DOMAIN" SOA 2>/dev/null | grep -q 'status: NOERROR'; then
      # Knot pins its workers to CPUs of its own choosing at start: move every thread back.
      taskset -a -p -c "$SERVER_CPU" "${PID[$name]}" >/dev/null
      return 0
    fi
    sleep 0.25
  done
  log "$name did not answer on $TARGET"; tail -20 "$work/$name.log" >&2; halt "$name"; return 1
}

# Stops a server. Knot attaches its XDP program through netlink and leaves it attached when it
# exits (skyline's is a BPF link, gone with the process): remove it, or the next XDP server
# finds the interface busy.
halt() { # name
  stop "$1"
  if [ "$1" = knot-xdp ]; then in_s ip link set dev "$IF_S" xdp off 2>/dev/null || true; fi
}

# Every ethtool statistic of both veth ends, as `device name: value` lines; nothing without
# ethtool.
veth_stats() {
  command -v ethtool >/dev/null || return 0
  in_s ethtool -S "$IF_S" | awk -v d="$IF_S" 'NR > 1 {print d, $1, $2}'
  in_c ethtool -S "$IF_C" | awk -v d="$IF_C" 'NR > 1 {print d, $1, $2}'
}

# Sum of user and system time of a process (all its threads), in clock ticks.
cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

# The counters a leg reads before and after the flood, as one line of `name=value` pairs: the
# server namespace's UDP counters, the drop counters of both veth ends, and skyline's own.
counters() { # server
  local udp
  # IPv4's Udp line (the second, the first names the fields) and IPv6's Udp6 counters, added.
  udp=$(in_s cat /proc/net/snmp /proc/net/snmp6 | awk '
    /^Udp:/ { if (seen) { i += $2; r += $6; o += $5; s += $7 } seen = 1 }
    $1 == "Udp6InDatagrams" { i += $2 } $1 == "Udp6RcvbufErrors" { r += $2 }
    $1 == "Udp6OutDatagrams" { o += $2 } $1 == "Udp6SndbufErrors" { s += $2 }
    END { print "in=" i, "rcvbuf=" r, "out=" o, "sndbuf=" s }')
  printf '%s srv_rx_drop=%s srv_tx_drop=%s cli_rx_drop=%s cli_tx_drop=%s' "$udp" \
    "$(in_s cat "/sys/class/net/$IF_S/statistics/rx_dropped")" "$(in_s cat "/sys/class/net/$IF_S/statistics/tx_dropped")" \
    "$(in_c cat "/sys/class/net/$IF_C/statistics/rx_dropped")" "$(in_c cat "/sys/class/net/$IF_C/statistics/tx_dropped")"
  if [[ "$1" == skyline* ]]; then
    in_s curl -s --max-time 2 "http://$HTTP/metrics" >"$work/metrics" 2>/dev/null || true
    awk '
      /^skyline_udp_send_failures_total/ { failed += $NF }
      /^coredns_dns_requests_total/ && /proto="udp"/ { queries += $NF }
      /^skyline_xdp_fill_ring_empty_total/ { empty += $NF }
      END { printf " sky_queries=%d sky_send_failed=%d sky_fill_empty=%d", queries, failed, empty }' "$work/metrics"
  else
    printf ' sky_queries=0 sky_send_failed=0 sky_fill_empty=0'
  fi
}

field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2" | head -1; }
delta() { echo $(($(field "$1" "$3") - $(field "$1" "$2"))); }

RUNS_HEADER=round,rate,server,sent,answered,answered_pps,udp_in,udp_rcvbuf_errors,udp_out,udp_sndbuf_errors,srv_rx_dropped,srv_tx_dropped,cli_rx_dropped,cli_tx_dropped,skyline_queries,skyline_send_failures,server_cpu_s,load1,fill_ring_empty

# Floods the server at `rate` for `seconds`; the output holds kxdpgun's `total queries:` and
# `total replies:` lines, written from skyline-flood's counts when GENERATOR=flood.
kxdpgun_run() { # rate seconds output
  if [ "$GENERATOR" = flood ]; then
    local source=$V4_C
    [ "$FAMILY" = 6 ] && source=$V6_C
    in_c taskset -c "$CLIENT_CPU" "${cprio[@]}" "$BIN/skyline-flood" -s "$(addr_port "$TARGET")" -d "$work/data/a.txt" \
      -l "$2" -Q "$1" --source "$source" >"$3.flood" 2>&1 || { cat "$3.flood" >"$3"; return 1; }
    awk '/^RESULT/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      print "total queries: " v["sent"]; print "total replies: " v["replies"] }' "$3.flood" >"$3"
    return 0
  fi
  in_c taskset -c "$CLIENT_CPU" "${cprio[@]}" kxdpgun -t "$2" -Q "$1" -b "$KXDPGUN_BATCH" -F "${CLIENT_CPU}s1" \
    -i "$work/data/a.txt" "$TARGET" >"$3" 2>&1
}

addr_port() { if [[ "$1" == *:* ]]; then echo "[$1]:53"; else echo "$1:53"; fi; }

leg() { # round rate server
  local round=$1 rate=$2 s=$3 out="$work/kxdpgun.out" before after load t0 t1
  if ! serve "$s" 15 "${prio[@]}"; then
    FAILED+=("$s r$round $rate")
    return 0
  fi
  local pid=${PID[$s]}
  # Warm-up: the zone data and every code path paged in, the XDP rings filled once.
  kxdpgun_run 20000 1 "$work/warm.out" || true
  load=$(cut -d' ' -f1 /proc/loadavg)
  veth_stats >"$work/veth-before.txt"
  before=$(counters "$s")
  t0=$(cpu_ticks "$pid")
  if ! kxdpgun_run "$rate" "$DURATION" "$out"; then
    log "kxdpgun failed:"; tail -5 "$out" >&2
    halt "$s"; FAILED+=("$s r$round $rate kxdpgun"); return 0
  fi
  t1=$(cpu_ticks "$pid")
  after=$(counters "$s")
  veth_stats >"$work/veth-after.txt"
  # Per-queue counters of both veth ends that moved during the flood (ethtool -S): where the
  # drops the table sums were counted (XDP redirect, ring full, which queue).
  awk 'NR == FNR { was[$1 $2] = $3; next } $3 != was[$1 $2] { print $1, $2, $3 - was[$1 $2] }' \
    "$work/veth-before.txt" "$work/veth-after.txt" >"$RESULTS/veth-$s-r$round-$rate.txt"
  if [[ "$s" == skyline* ]]; then cp "$work/metrics" "$RESULTS/metrics-$s-r$round-$rate.txt"; fi
  cp "$out" "$RESULTS/kxdpgun-$s-r$round-$rate.txt"
  halt "$s"
  local sent answered pps cpu
  sent=$(awk '/^total queries:/ {print $3}' "$out")
  answered=$(awk '/^total replies:/ {print $3}' "$out")
  answered=${answered:-0}
  pps=$(awk -v n="$answered" -v d="$DURATION" 'BEGIN {printf "%.0f", n / d}')
  cpu=$(awk -v t=$((t1 - t0)) -v hz="$tick" 'BEGIN {printf "%.2f", t / hz}')
  echo "$round,$rate,$s,$sent,$answered,$pps,$(delta in "$before" "$after"),$(delta rcvbuf "$before" "$after"),$(delta out "$before" "$after"),$(delta sndbuf "$before" "$after"),$(delta srv_rx_drop "$before" "$after"),$(delta srv_tx_drop "$before" "$after"),$(delta cli_rx_drop "$before" "$after"),$(delta cli_tx_drop "$before" "$after"),$(delta sky_queries "$before" "$after"),$(delta sky_send_failed "$before" "$after"),$cpu,$load,$(delta sky_fill_empty "$before" "$after")" >>"$RESULTS/runs.csv"
  log "$(printf 'r%s %-8s %-11s sent=%-8s answered=%-8s (%s/s) udp_in=%s rcvbuf_err=%s udp_out=%s sndbuf_err=%s srv_tx_drop=%s cli_rx_drop=%s fill_ring_empty=%s load=%s' \
    "$round" "$rate" "$s" "$sent" "$answered" "$pps" "$(delta in "$before" "$after")" "$(delta rcvbuf "$before" "$after")" \
    "$(delta out "$before" "$after")" "$(delta sndbuf "$before" "$after")" "$(delta srv_tx_drop "$before" "$after")" \
    "$(delta cli_rx_drop "$before" "$after")" "$(delta sky_fill_empty "$before" "$after")" "$load")"
}

# Server order for a round: as given in odd rounds, reversed in even ones.
order() {
  local list
  read -ra list <<<"$SERVERS"
  if [ $(($1 % 2)) -eq 0 ]; then
    local i
    for ((i = ${#list[@]} - 1; i >= 0; i--)); do printf '%s ' "${list[$i]}"; done
  else
    printf '%s ' "${list[@]}"
  fi
}

FAILED=()

flood() {
  echo "$RUNS_HEADER" >"$RESULTS/runs.csv"
  rm -f "$RESULTS"/metrics-*.txt "$RESULTS"/kxdpgun-*.txt "$RESULTS"/veth-*.txt
  local round rate s
  for round in $(seq "$ROUNDS"); do
    for rate in $RATES; do
      for s in $(order "$round"); do leg "$round" "$rate" "$s"; done
    done
  done
}

# User-space instructions per answer: each server under callgrind, flooded at a rate it keeps up
# with under valgrind.
callgrind() {
  if ! command -v valgrind >/dev/null || ! command -v callgrind_control >/dev/null; then
    log "valgrind is not installed: skipping callgrind"; return 0
  fi
  echo "server,rate,instructions,answered" >"$RESULTS/callgrind.csv"
  mkdir -p "$work/cg"
  local s
  for s in $SERVERS; do
    if ! serve "$s" 120 valgrind --tool=callgrind --callgrind-out-file="$work/cg/$s.%p"; then
      FAILED+=("$s callgrind")
      continue
    fi
    local pid=${PID[$s]}
    kxdpgun_run 2000 1 "$work/cg/warm" || true
    callgrind_control -z "$pid" >/dev/null 2>&1
    ls "$work/cg/$s.$pid".* >"$work/cg/before" 2>/dev/null || true
    kxdpgun_run "$CALLGRIND_RATE" "$CALLGRIND_SECONDS" "$work/cg/out" || true
    callgrind_control -d "$pid" >/dev/null 2>&1
    local answered instructions
    answered=$(awk '/^total replies:/ {print $3}' "$work/cg/out")
    instructions=$(new_instructions "$work/cg/before" "$work/cg/$s.$pid")
    echo "$s,$CALLGRIND_RATE,$instructions,${answered:-0}" >>"$RESULTS/callgrind.csv"
    log "callgrind $s: $instructions instructions for ${answered:-0} answers: $(awk -v i="$instructions" -v n="${answered:-0}" 'BEGIN {if (n > 0) printf "%.0f", i / n; else print "nan"}') per answer"
    halt "$s"
  done
}

environment() {
  {
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "kernel: $(uname -r)"
    echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(nproc) cores"
    echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "knotd: $(knotd -V 2>&1 | head -1)"
    echo "kxdpgun: $(kxdpgun -V 2>&1 | head -1)"
    echo "generator: $GENERATOR"
    echo "skyline: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo '+changes')"
    echo "rounds=$ROUNDS duration=$DURATION rates=$RATES kxdpgun_batch=$KXDPGUN_BATCH family=$FAMILY services=$SERVICES priority=${prio[*]:-none} generator priority=${cprio[*]:-none}"
    echo "server cpu=$SERVER_CPU client cpu=$CLIENT_CPU skyline=$SKYLINE_BIN $SKYLINE_FLAGS xdp_flags=$XDP_FLAGS"
  } >"$RESULTS/environment.txt"
}

# Medians per rate and server over the rounds, the ratios of the targets (the ratio of medians,
# and the median of the per-round ratios), the load average, and the picture.
report() {
  [ -f "$RESULTS/runs.csv" ] || { log "no $RESULTS/runs.csv"; return 0; }
  local cg="$RESULTS/callgrind.csv"
  [ -f "$cg" ] || cg=/dev/null
  awk -F, -v svg="$RESULTS/xdp.svg" -v duration="$DURATION" '
    function median(list,   n, v, i, j, t) {
      n = split(list, v, " ")
      if (n == 0) return "nan"
      for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
      return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    function ratio(a, b) { return (a == "" || b == "" || a == "nan" || b == "nan" || b + 0 == 0) ? "nan" : sprintf("%.2f", a / b) }
    FNR == 1 { file++; next }
    file == 1 {
      if (!($2 in seenrate)) { seenrate[$2] = 1; rates[++nrates] = $2 }
      if (!($3 in seenserver)) { seenserver[$3] = 1; servers[++nservers] = $3 }
      k = $2 SUBSEP $3
      pps[k] = pps[k] " " $6; sent[k] += $4; answered[k] += $5; in_[k] += $7; rcv[k] += $8; out[k] += $9
      snd[k] += $10; srx[k] += $11; stx[k] += $12; crx[k] += $13; ctx[k] += $14; skyq[k] += $15; skyf[k] += $16; cpu[k] = cpu[k] " " ($5 > 0 ? $17 * 1e6 / $5 : "nan")
      load[k] = load[k] " " $18; loads = loads " " $18
      byround[$2, $1, $3] = $6
      if (!(($2, $1) in seenround)) { seenround[$2, $1] = 1; rounds[$2] = rounds[$2] " " $1 }
    }
    file == 2 { if ($4 > 0) ipa[$1] = sprintf("%.0f", $3 / $4) }
    END {
      print "| rate (q/s) | server | answered q/s (median) | sent | answered | answered / sent | UDP in | rcvbuf errors | UDP out | sndbuf errors | server veth rx drops (queries) | server veth tx drops | client veth rx drops (replies) | client veth tx drops (queries) | skyline send failures | server CPU µs/answer | load1 (median) | user instructions / answer |"
      print "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
      for (r = 1; r <= nrates; r++) for (s = 1; s <= nservers; s++) {
        k = rates[r] SUBSEP servers[s]
        if (!(k in pps)) continue
        m[k] = median(pps[k])
        printf "| %s | %s | %.0f | %d | %d | %.4f | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s | %s | %s |\n", rates[r], servers[s], m[k],
          sent[k], answered[k], (sent[k] > 0 ? answered[k] / sent[k] : 0), in_[k], rcv[k], out[k], snd[k], srx[k], stx[k], crx[k], ctx[k], skyf[k],
          median(cpu[k]), median(load[k]), (servers[s] in ipa ? ipa[servers[s]] : "nan")
      }
      print ""
      print "| rate (q/s) | skyline XDP / Knot XDP | per-round median | target | skyline XDP / skyline kernel | per-round median | target |"
      print "|---|---|---|---|---|---|---|"
      for (r = 1; r <= nrates; r++) {
        q = rates[r]
        n = split(rounds[q], rl, " "); a = ""; b = ""
        for (i = 1; i <= n; i++) {
          x = byround[q, rl[i], "skyline-xdp"]; y = byround[q, rl[i], "knot-xdp"]; z = byround[q, rl[i], "skyline"]
          if (x != "" && y + 0 > 0) a = a " " x / y
          if (x != "" && z + 0 > 0) b = b " " x / z
        }
        ra = ratio(m[q, "skyline-xdp"], m[q, "knot-xdp"]); rb = ratio(m[q, "skyline-xdp"], m[q, "skyline"])
        pa = median(a); pb = median(b)
        printf "| %s | %s | %s | %s | %s | %s | %s |\n", q, ra, (pa == "nan" ? pa : sprintf("%.2f", pa)),
          (ra == "nan" ? "no data" : (ra >= 1.2 ? "met (>= 1.2)" : "missed (< 1.2)")), rb, (pb == "nan" ? pb : sprintf("%.2f", pb)),
          (rb == "nan" ? "no data" : (rb >= 3 ? "met (>= 3)" : "missed (< 3)"))
      }
      print ""
      printf "Load average (1 min) at the start of the legs: median %s.\n", median(loads)

      # The picture: median answered rate per server (bars), one group per offered rate.
      width = 160 + nrates * (nservers * 70 + 40); height = 360; top = 0
      for (k in m) if (m[k] + 0 > top) top = m[k] + 0
      if (top == 0) top = 1
      split("#1f77b4 #aec7e8 #d62728 #ff9896 #2ca02c #98df8a", colour, " ")
      printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", width, height > svg
      printf "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n" > svg
      printf "<text x=\"%d\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">Answered queries per second on a veth pair under a kxdpgun flood (median of the rounds, %s s each)</text>\n", width / 2, duration > svg
      printf "<line x1=\"70\" y1=\"300\" x2=\"%d\" y2=\"300\" stroke=\"black\"/><line x1=\"70\" y1=\"40\" x2=\"70\" y2=\"300\" stroke=\"black\"/>\n", width - 20 > svg
      for (t = 0; t <= 4; t++) {
        y = 300 - t * 65
        printf "<text x=\"64\" y=\"%d\" text-anchor=\"end\">%.0fk</text><line x1=\"70\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#ddd\"/>\n", y + 4, top * t / 4 / 1000, y, width - 20, y > svg
      }
      x = 90
      for (r = 1; r <= nrates; r++) {
        for (s = 1; s <= nservers; s++) {
          k = rates[r] SUBSEP servers[s]
          v = (k in m) ? m[k] + 0 : 0
          h = v / top * 260
          printf "<rect x=\"%d\" y=\"%.1f\" width=\"60\" height=\"%.1f\" fill=\"%s\"/>\n", x, 300 - h, h, colour[(s - 1) % 6 + 1] > svg
          printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"middle\">%.0fk</text>\n", x + 30, 296 - h, v / 1000 > svg
          printf "<text x=\"%d\" y=\"316\" text-anchor=\"middle\">%s</text>\n", x + 30, servers[s] > svg
          x += 70
        }
        printf "<text x=\"%d\" y=\"340\" text-anchor=\"middle\">offered %s q/s</text>\n", x - nservers * 35, rates[r] > svg
        x += 40
      }
      print "</svg>" > svg
    }' "$RESULTS/runs.csv" "$cg" >"$RESULTS/summary.md"
  cat "$RESULTS/summary.md" >&2
  log "results: $RESULTS/summary.md, $RESULTS/runs.csv, $RESULTS/xdp.svg"
}

prepare
case "$MODE" in
all) environment; flood; callgrind; report ;;
flood) environment; flood; report ;;
callgrind) callgrind; report ;;
report) report ;;
esac
if [ ${#FAILED[@]} -gt 0 ]; then
  log "legs that failed: ${FAILED[*]}"
  exit 1
fi
