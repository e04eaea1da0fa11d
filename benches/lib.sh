# Shared by the load scripts in benches/ (compare.sh, miss_latency.sh, miss_instructions.sh,
# cache_hits.sh, corefile.sh, node_cache.sh, ...): logging, the scratch directory and the servers
# started in it (pinned), stopped on exit, free ports, readiness, a Knot configuration, dnsdist
# ones (forwarding, caching) and the wildcard zone the forwarding benches serve. Source it after `set -euo pipefail`; it sets `work`, `PID`, `PORT`
# and `prio`.

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

work=$(mktemp -d)
declare -A PID PORT
cleanup() {
  for name in "${!PID[@]}"; do stop "$name"; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# As root, servers and generators run at real-time priority so that other work disturbs them less.
prio=()
if [ "$(id -u)" -eq 0 ] && command -v chrt >/dev/null; then prio=(chrt -f 1); fi

# A port between 20000 and 39999 that no UDP or TCP socket uses now (the kernel's tables in
# /proc/net) and that this script has not handed out yet (PORT).
free_port() {
  local port hex tables=() table
  for table in /proc/net/udp /proc/net/udp6 /proc/net/tcp /proc/net/tcp6; do
    [ -r "$table" ] && tables+=("$table")
  done
  for _ in $(seq 100); do
    port=$((20000 + RANDOM % 20000))
    [[ " ${PORT[*]} " == *" $port "* ]] && continue
    hex=$(printf '%04X' "$port")
    if ! awk -v p=":$hex" '$2 ~ p"$" {used = 1} END {exit !used}' "${tables[@]}" </dev/null; then
      echo "$port"
      return 0
    fi
  done
  log "no free port found"
  return 1
}

wait_ready() { # name, probe name, seconds: until the server answers SOA for the probe name
  local port=${PORT[$1]} tries=$(($3 * 4))
  for _ in $(seq "$tries"); do
    if ! kill -0 "${PID[$1]}" 2>/dev/null; then
      log "$1 exited early:"; tail -20 "$work/$1.log" >&2; return 1
    fi
    dig +time=1 +tries=1 +norec @127.0.0.1 -p "$port" "$2" SOA >/dev/null 2>&1 && return 0
    sleep 0.25
  done
  log "$1 on port $port did not answer"; tail -20 "$work/$1.log" >&2; return 1
}

stop() { # name
  local pid=${PID[$1]:-}
  [ -n "$pid" ] || return 0
  # A second SIGTERM ends skyline's drain period at once (others stop on the first).
  kill "$pid" 2>/dev/null || true
  sleep 0.05
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset "PID[$1]"
}

# One server pinned to SERVER_CPU, run by the wrapper if any; the sourcing script defines
# `server_cmd NAME PORT` (the command line) and DOMAIN (the name readiness is probed with).
start() { # name [wrapper...]
  local name=$1; shift
  local port cmd
  port=$(free_port)
  cmd=$(server_cmd "$name" "$port")
  # shellcheck disable=SC2086 # the command line is split on purpose
  taskset -c "$SERVER_CPU" "$@" $cmd >"$work/$name.log" 2>&1 &
  PID[$name]=$!
  PORT[$name]=$port
  wait_ready "$name" "$DOMAIN" "${READY_SECONDS:-10}"
  # Knot pins its UDP worker to a CPU of its own choosing at start: move every thread back.
  taskset -a -p -c "$SERVER_CPU" "${PID[$name]}" >/dev/null
}

# Sums the `summary:` lines (instructions executed) of the callgrind dump files with the given
# prefix that appeared since the listing in $1 was taken.
new_instructions() { # old listing, prefix
  local total=0 f
  for f in "$2".*; do
    grep -qxF "$f" "$1" && continue
    [ -f "$f" ] || continue
    total=$((total + $(awk '/^summary:/ {s += $2} END {print s + 0}' "$f")))
  done
  echo "$total"
}

knot_conf() { # port, zone (with its final dot), zone file: $work/knot/knot.conf, one worker each
  mkdir -p "$work/knot"
  cat >"$work/knot/knot.conf" <<CONF
server:
    listen: 127.0.0.1@$1
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
  - domain: $2
    file: $3
CONF
}

dnsdist_conf() { # port, upstream port, zone (without its final dot), file: dnsdist forwarding to
  # the upstream on 127.0.0.1, no packet cache (every query goes upstream), no security polling
  # (nothing outside is reached)
  cat >"$4" <<CONF
setLocal("127.0.0.1:$1")
setACL({"127.0.0.0/8"})
setSecurityPollSuffix("")
newServer({address="127.0.0.1:$2", checkName="$3.", checkType="SOA"})
CONF
}

dnsdist_cache_conf() { # port, upstream port, file, [packet cache arguments]: dnsdist as a cache in
  # front of the upstream on 127.0.0.1 (a packet cache of 100000 entries unless told otherwise)
  cat >"$3" <<CONF
setLocal("127.0.0.1:$1")
setACL({"127.0.0.0/8"})
setSecurityPollSuffix("")
newServer({address="127.0.0.1:$2"})
getPool(""):setCache(newPacketCache(${4:-100000}))
CONF
}

run_pinned() { # name, CPU list, command...: in the background on those CPUs (at real-time priority
  # as root), its output in $work/NAME.log, its PID in PID[NAME]
  local name=$1 cpu=$2
  shift 2
  taskset -c "$cpu" "${prio[@]}" "$@" >"$work/$name.log" 2>&1 &
  PID[$name]=$!
}

wildcard_zone() { # zone (without its final dot), file: a zone where every name holds `A 192.0.2.1`
  cat >"$2" <<ZONEFILE
\$ORIGIN $1.
\$TTL 3600
@   SOA ns.$1. hostmaster.$1. 1 3600 600 86400 60
@   NS  ns.$1.
ns  A   192.0.2.53
*   A   192.0.2.1
ZONEFILE
}
