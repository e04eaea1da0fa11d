#!/usr/bin/env bash
# Forwarded queries per second over each upstream transport: UDP (skyline's default, CoreDNS's
# prefer_udp), TCP on persistent connections (force_tcp) and DNS over TLS, to one local
# upstream, skyline next to dnsdist doing the same. The upstream is Unbound, serving
# example.org. as a redirect zone (every name under it answers A 192.0.2.1) over UDP and TCP on
# one port and over TLS on another, with a CA and certificate made for the run. Every query is
# a distinct name, so no cache answers one: each goes upstream. dnsperf sends the queries over
# UDP to the forwarder, as fast as it takes them with OUTSTANDING queries in flight, for
# DURATION seconds per run; a run per transport and forwarder, ROUNDS times, alternating.
#
# Usage: benches/upstream_transport.sh
# Knobs (environment, defaults in brackets): ROUNDS [3], DURATION [10] seconds per run,
# OUTSTANDING [64], CLIENT_CPU [0], FORWARDER_CPU [1], UPSTREAM_CPU [0] (taskset CPU lists),
# SKYLINE_BIN [target/release/skyline], BUILD [1] (0: use the binary as it is), RESULTS
# [benches/results/upstream_transport].
# A quick look: ROUNDS=1 DURATION=3 benches/upstream_transport.sh
#
# Everything listens on 127.0.0.1 only, every run is bounded in time, and every process this
# script starts is stopped when it exits.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-10}"
OUTSTANDING="${OUTSTANDING:-64}"
CLIENT_CPU="${CLIENT_CPU:-0}"
FORWARDER_CPU="${FORWARDER_CPU:-1}"
UPSTREAM_CPU="${UPSTREAM_CPU:-0}"
SKYLINE_BIN="${SKYLINE_BIN:-target/release/skyline}"
BUILD="${BUILD:-1}"
RESULTS="${RESULTS:-benches/results/upstream_transport}"
ZONE=example.org

if [ $# -gt 0 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
  exit 2
fi

# shellcheck source=benches/lib.sh
source benches/lib.sh

for tool in unbound dnsdist dnsperf openssl dig curl; do
  command -v "$tool" >/dev/null || { log "$tool is needed (scripts/setup.sh bench)"; exit 1; }
done

pki() { # the CA and the upstream's certificate, for dns.test and 127.0.0.1
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=upstream bench CA" -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=dns.test" -keyout "$work/upstream.key" -out "$work/upstream.csr" 2>/dev/null
  printf 'subjectAltName=DNS:dns.test,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' >"$work/san.ext"
  openssl x509 -req -in "$work/upstream.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" \
    -CAcreateserial -days 2 -extfile "$work/san.ext" -out "$work/upstream.pem" 2>/dev/null
}

start_upstream() {
  PORT[unbound]=$(free_port)
  PORT[unbound_tls]=$(free_port)
  cat >"$work/unbound.conf" <<CONF
server:
    interface: 127.0.0.1@${PORT[unbound]}
    interface: 127.0.0.1@${PORT[unbound_tls]}
    tls-port: ${PORT[unbound_tls]}
    tls-service-key: "$work/upstream.key"
    tls-service-pem: "$work/upstream.pem"
    do-daemonize: no
    username: ""
    chroot: ""
    directory: "$work"
    pidfile: ""
    use-syslog: no
    verbosity: 0
    num-threads: 1
    access-control: 127.0.0.0/8 allow
    module-config: "iterator"
    incoming-num-tcp: 256
    tcp-idle-timeout: 30000
    local-zone: "$ZONE." redirect
    local-data: "$ZONE. 3600 IN A 192.0.2.1"
    local-data: "$ZONE. 3600 IN SOA ns.$ZONE. hostmaster.$ZONE. 1 3600 600 86400 60"
CONF
  taskset -c "$UPSTREAM_CPU" unbound -d -c "$work/unbound.conf" >"$work/unbound.log" 2>&1 &
  PID[unbound]=$!
  wait_ready unbound "$ZONE." 10
}

forwarder_cmd() { # forwarder transport port: the command line of skyline or dnsdist
  local up=127.0.0.1:${PORT[unbound]} tls=127.0.0.1:${PORT[unbound_tls]}
  case "$1/$2" in
    skyline/udp) echo "$SKYLINE_BIN --nameservers $up" ;;
    skyline/tcp) echo "$SKYLINE_BIN --nameservers $up --forward-force-tcp" ;;
    skyline/tls) echo "$SKYLINE_BIN --nameservers $tls --forward-tls --forward-tls-ca $work/ca.pem --forward-tls-servername dns.test" ;;
    dnsdist/*)
      local server
      case "$2" in
        udp) server="address=\"$up\"" ;;
        tcp) server="address=\"$up\", tcpOnly=true" ;;
        tls) server="address=\"$tls\", tls=\"openssl\", subjectName=\"dns.test\", caStore=\"$work/ca.pem\", validateCertificates=true" ;;
      esac
      cat >"$work/dnsdist-$2.conf" <<CONF
setLocal("127.0.0.1:$3")
setACL({"127.0.0.0/8"})
setSecurityPollSuffix("")
newServer({$server, checkName="$ZONE.", checkType="SOA"})
CONF
      echo "dnsdist --supervised --disable-syslog -C $work/dnsdist-$2.conf"
      ;;
  esac
}

start_forwarder() { # forwarder transport
  local port
  port=$(free_port)
  PORT[$1]=$port
  local cmd
  cmd=$(forwarder_cmd "$1" "$2" "$port")
  if [ "$1" = skyline ]; then
    PORT[skyline_http]=$(free_port)
    cmd="$cmd --records $work/records.json --addr 127.0.0.1:$port --workers 1 --no-pin --resolv-conf none"
    cmd="$cmd --http-addr 127.0.0.1:${PORT[skyline_http]}"
  fi
  # shellcheck disable=SC2086 # the command line is split on purpose
  taskset -c "$FORWARDER_CPU" $cmd >"$work/$1.log" 2>&1 &
  PID[$1]=$!
  wait_ready "$1" "$ZONE." 10
  local got
  got=$(dig +short +time=2 +tries=1 @127.0.0.1 -p "$port" "check-$2.$ZONE" A)
  if [ "$got" != 192.0.2.1 ]; then
    log "$1 over $2 did not forward check-$2.$ZONE (got '$got')"; tail -20 "$work/$1.log" >&2; return 1
  fi
}

names() { # tag count
  awk -v t="$1" -v n="$2" -v z="$ZONE" 'BEGIN {for (i = 1; i <= n; i++) printf "%s%08d.%s A\n", t, i, z}'
}

run_one() { # round forwarder transport
  local round=$1 fwd=$2 transport=$3 file="$work/q.txt" out="$work/out.txt"
  start_forwarder "$fwd" "$transport"
  # More distinct names than a run can send at 200k q/s: none repeats, nothing is a cache hit.
  names "r$round$fwd$transport" $((DURATION * 200000)) >"$file"
  timeout $((DURATION + 30)) taskset -c "$CLIENT_CPU" dnsperf -s 127.0.0.1 -p "${PORT[$fwd]}" \
    -d "$file" -n 1 -l "$DURATION" -c 4 -q "$OUTSTANDING" -t 2 >"$out" 2>&1 || true
  local qps completed lost avg
  qps=$(awk '/Queries per second:/ {printf "%.0f", $4}' "$out")
  completed=$(awk '/Queries completed:/ {print $3}' "$out")
  lost=$(awk '/Queries lost:/ {print $3}' "$out")
  avg=$(awk '/Average Latency/ {printf "%.0f", $4 * 1e6}' "$out")
  # skyline's persistent upstream connections: opened, and queries that reused one.
  local opened="" reused=""
  if [ "$fwd" = skyline ]; then
    local metrics
    metrics=$(curl -s --max-time 2 "http://127.0.0.1:${PORT[skyline_http]}/metrics" || true)
    opened=$(awk '/^skyline_forward_connections_opened_total/ {s += $2} END {print s + 0}' <<<"$metrics")
    reused=$(awk '/^skyline_forward_connections_reused_total/ {s += $2} END {print s + 0}' <<<"$metrics")
  fi
  stop "$fwd"
  echo "$round,$fwd,$transport,$qps,$completed,$lost,$avg,$opened,$reused" >>"$RESULTS/runs.csv"
  log "$(printf 'r%s %-8s %-4s qps=%-7s completed=%-8s lost=%-6s avg_us=%-6s conns_opened=%s reused=%s' \
    "$round" "$fwd" "$transport" "$qps" "$completed" "$lost" "$avg" "$opened" "$reused")"
}

main() {
  if [ "$BUILD" = 1 ]; then
    log "building the release binary"
    cargo build --release --locked -p skyline --bin skyline >&2
  fi
  mkdir -p "$RESULTS"
  echo "round,forwarder,transport,qps,completed,lost,avg_us,connections_opened,connections_reused" >"$RESULTS/runs.csv"
  cat >"$work/records.json" <<'JSON'
{"/skydns/local/skydns/hosts/node1": {"host": "10.0.0.101"}}
JSON
  pki
  start_upstream
  log "unbound=127.0.0.1:${PORT[unbound]} tls=127.0.0.1:${PORT[unbound_tls]} (pid ${PID[unbound]}, cpu $UPSTREAM_CPU)"
  for round in $(seq "$ROUNDS"); do
    for transport in udp tcp tls; do
      if [ $((round % 2)) = 1 ]; then
        run_one "$round" skyline "$transport"; run_one "$round" dnsdist "$transport"
      else
        run_one "$round" dnsdist "$transport"; run_one "$round" skyline "$transport"
      fi
    done
  done
  {
    echo "| transport | skyline q/s | dnsdist q/s | skyline / dnsdist | skyline avg µs | dnsdist avg µs |"
    echo "|---|---|---|---|---|---|"
    for transport in udp tcp tls; do
      awk -F, -v t="$transport" '
        NR > 1 && $3 == t {q[$2] = q[$2] " " $4; a[$2] = a[$2] " " $7}
        function median(list,  v, n, i, j, x) {
          n = split(list, v, " ")
          for (i = 2; i <= n; i++) {x = v[i]; for (j = i - 1; j >= 1 && v[j] + 0 > x + 0; j--) v[j + 1] = v[j]; v[j + 1] = x}
          return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        }
        END {
          s = median(q["skyline"]); d = median(q["dnsdist"])
          printf "| %s | %.0f | %.0f | %.2f | %.0f | %.0f |\n", t, s, d, (d > 0 ? s / d : 0), median(a["skyline"]), median(a["dnsdist"])
        }' "$RESULTS/runs.csv"
    done
  } >"$RESULTS/summary.md"
  cat "$RESULTS/summary.md" >&2
}

main
