#!/usr/bin/env bash
# Where the time of a cache miss goes: skyline (one worker) and dnsdist (no packet cache), each
# forwarding never-repeated names to Knot DNS on the same CPU, their system calls that move
# datagrams or wait for them traced with `perf record` (entry and exit, all CPUs). Each miss is
# cut at the calls it passes through, and the median of every segment over the misses is
# printed for both forwarders, in µs:
#
#   woken               the client's send to the forwarder's return from waiting (skyline:
#                       epoll_wait; dnsdist: the read itself, it blocks in it)
#   to_forwarder        the client's send to the forwarder's read of the query (its return)
#   in_user             that read to the query to Knot (the send's entry): user-space work
#   to_knot             that send to Knot's read of the query
#   knot                Knot's read to its reply's send
#   to_forwarder_again  Knot's send to the forwarder's read of the reply
#   out_user            that read to the reply to the client: user-space work
#   to_client           that send to the client's read of the reply
#   total               the client's send to its read
#
# Tracing adds a few µs to every traced system call, so a forwarder that makes more of them
# looks slower here than it is: compare segments, and latency with benches/miss_latency.sh.
# Queries go one at a time (`-Q` RATE, well below what either forwarder serves), so that no two
# misses overlap.
#
# Usage: benches/miss_segments.sh
# Knobs (environment, defaults in brackets): MISSES [1000], RATE [500] queries per second,
# ROUNDS [3] (the two forwarders in turn, a fresh name set each), CLIENT_CPU [0], SERVER_CPU
# [1] (Knot and the forwarder), RT [1] (0: the servers at normal priority),
# SKYLINE_BIN [target/release/skyline], BUILD [1] (0: use the binary as it is), KEEP [none] (a
# directory to keep each round's per-miss segments and trace in).
#
# Everything listens on 127.0.0.1 only, every run is bounded in time, and every process this
# script starts is stopped when it exits. Needs root (perf's tracepoints) and `perf`. The
# servers run at real-time priority (chrt -f 1) unless RT=0, dnsperf at normal priority, as in
# benches/miss_latency.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

MISSES="${MISSES:-1000}"
RATE="${RATE:-500}"
ROUNDS="${ROUNDS:-3}"
CLIENT_CPU="${CLIENT_CPU:-0}"
SERVER_CPU="${SERVER_CPU:-1}"
SKYLINE_BIN="${SKYLINE_BIN:-target/release/skyline}"
BUILD="${BUILD:-1}"
ZONE=example.org

# shellcheck source=benches/lib.sh
source benches/lib.sh
[ "${RT:-1}" = 1 ] || prio=()

scripts/setup.sh bench
command -v perf >/dev/null || { log "perf is needed (Debian linux-perf)"; exit 2; }
if [ "$BUILD" = 1 ]; then
  cargo build --release --locked -p skyline --bin skyline >&2
fi

mkdir -p "$work/knot"
wildcard_zone "$ZONE" "$work/knot/$ZONE.zone"
cat >"$work/records.json" <<'JSON'
{"/skydns/local/skydns/hosts/node1": {"host": "10.0.0.101"}}
JSON

pinned() { # name probe-name command...: starts it on SERVER_CPU, every thread kept there
  local name=$1 probe=$2
  shift 2
  taskset -c "$SERVER_CPU" "${prio[@]}" "$@" >"$work/$name.log" 2>&1 &
  PID[$name]=$!
  wait_ready "$name" "$probe" 10
  taskset -a -p -c "$SERVER_CPU" "${PID[$name]}" >/dev/null
}

PORT[knot]=$(free_port)
knot_conf "${PORT[knot]}" "$ZONE." "$work/knot/$ZONE.zone"
pinned knot "$ZONE." knotd -c "$work/knot/knot.conf"
PORT[skyline]=$(free_port)
pinned skyline skydns.local. "$SKYLINE_BIN" --records "$work/records.json" \
  --nameservers "127.0.0.1:${PORT[knot]}" --addr "127.0.0.1:${PORT[skyline]}" --workers 1 --no-pin
PORT[dnsdist]=$(free_port)
dnsdist_conf "${PORT[dnsdist]}" "${PORT[knot]}" "$ZONE" "$work/dnsdist.conf"
pinned dnsdist "$ZONE." dnsdist --supervised --disable-syslog -C "$work/dnsdist.conf"

names() { # tag count: never-repeated names, <tag><7 digits>.example.org A
  awk -v t="$1" -v n="$2" -v z="$ZONE" 'BEGIN {for (i = 1; i <= n; i++) printf "%s%07d.%s A\n", t, i, z}'
}

query() { # forwarder file: sends the file once, one query at a time, at RATE, waiting 2 s at
  # most for each answer; sets CLIENT to dnsperf's PID (taskset execs it).
  taskset -c "$CLIENT_CPU" dnsperf -s 127.0.0.1 -p "${PORT[$1]}" -d "$2" -n 1 -c 1 -q 1 \
    -Q "$RATE" -t 2 >"$work/dnsperf.out" 2>&1 &
  CLIENT=$!
}

# The segments of every miss in `perf script` output on stdin, one CSV line a miss (µs).
# Processes are told apart by PID: C the client, F the forwarder, K Knot.
segments() { # client-pid forwarder-pid knot-pid
  awk -v C="$1" -v F="$2" -v K="$3" '
    function us(t) { return sprintf("%.1f", t * 1e6) }
    BEGIN { print "woken,to_forwarder,in_user,to_knot,knot,to_forwarder_again,out_user,to_client,total" }
    {
      split($2, ids, "/"); pid = ids[1] + 0; tid = ids[2] + 0
      t = $4 + 0; ev = $5
      nr = $0; sub(/.*NR /, "", nr); sub(/ .*/, "", nr); nr += 0
      is_send = (nr == 44 || nr == 46 || nr == 307)
      is_recv = (nr == 45 || nr == 47 || nr == 299)
      if (ev == "raw_syscalls:sys_enter:") {
        if (pid == C && is_send) {
          t_send = t; t_woken = 0; s = 1
        } else if (pid == F && is_send && s == 2 && tid == in_tid) {
          t_up = t; s = 3
        } else if (pid == K && is_send && s == 4 && tid == knot_tid) {
          t_kreply = t; s = 5
        } else if (pid == F && is_send && s == 6 && tid == out_tid) {
          t_reply = t; s = 7
        }
        next
      }
      ret = $0; sub(/.*= /, "", ret); ret += 0
      if (pid == F && s == 1 && !t_woken && (nr == 232 || nr == 281)) t_woken = t
      if (ret <= 0 || !is_recv) next
      if (pid == F && s == 1) {
        if (!t_woken) t_woken = t
        t_read = t; in_tid = tid; s = 2
      } else if (pid == K && s == 3) {
        t_kread = t; knot_tid = tid; s = 4
      } else if (pid == F && s == 5) {
        t_bread = t; out_tid = tid; s = 6
      } else if (pid == C && s == 7) {
        print us(t_woken - t_send) "," us(t_read - t_send) "," us(t_up - t_read) "," us(t_kread - t_up) "," us(t_kreply - t_kread) "," \
          us(t_bread - t_kreply) "," us(t_reply - t_bread) "," us(t - t_reply) "," us(t - t_send)
        s = 0
      }
    }'
}

trace() { # forwarder round: prints the per-miss CSV
  local name=$1 round=$2 client
  names "${name:0:1}$round" "$MISSES" >"$work/names.txt"
  # Only the calls that move datagrams or wait: dnsperf polls its socket with a million ioctls a
  # second. sendto, recvfrom, sendmsg, recvmsg, recvmmsg, sendmmsg, epoll_wait, epoll_pwait.
  local calls="id == 44 || id == 45 || id == 46 || id == 47 || id == 299 || id == 307 || id == 232 || id == 281"
  perf record -q -a -o "$work/perf.data" -e raw_syscalls:sys_enter --filter "$calls" \
    -e raw_syscalls:sys_exit --filter "$calls" -- sleep $((MISSES / RATE + 3)) >/dev/null 2>&1 &
  local recorder=$!
  sleep 1
  query "$name" "$work/names.txt"
  client=$CLIENT
  wait "$client" || true
  wait "$recorder" || true
  perf script -i "$work/perf.data" --ns -F comm,pid,tid,cpu,time,event,trace 2>/dev/null |
    sed -E 's/^ *[^ ]+( [^ ]+)* +([0-9]+\/[0-9]+) +/x \2 /' |
    tee "$work/$name-$round.script" | segments "$client" "${PID[$name]}" "${PID[knot]}"
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP"; cp "$work/$name-$round.script" "$KEEP/"; fi
  rm -f "$work/$name-$round.script"
}

# Warm both forwarders (code paged in, Knot's round-trip time known).
for name in skyline dnsdist; do
  names "${name:0:1}w" 200 >"$work/warm.txt"
  query "$name" "$work/warm.txt"
  wait "$CLIENT" || true
done

COLUMNS_OUT="woken to_forwarder in_user to_knot knot to_forwarder_again out_user to_client total"
declare -A ALL
for round in $(seq "$ROUNDS"); do
  for name in skyline dnsdist; do
    trace "$name" "$round" >"$work/$name-$round.csv"
    if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP"; cp "$work/$name-$round.csv" "$KEEP/"; fi
    log "$name round $round: $(($(wc -l <"$work/$name-$round.csv") - 1)) misses traced"
    ALL[$name]+=" $work/$name-$round.csv"
  done
done

median_of() { # column files...: the median of that column over every miss in the files
  local column=$1
  shift
  awk -F, -v c="$column" 'FNR == 1 {for (i = 1; i <= NF; i++) if ($i == c) k = i; next} {print $k}' "$@" |
    sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

printf '%-14s %10s %10s %10s\n' "median µs" skyline dnsdist "difference"
for column in $COLUMNS_OUT; do
  # shellcheck disable=SC2086 # the file lists are split on purpose
  s=$(median_of "$column" ${ALL[skyline]})
  # shellcheck disable=SC2086
  d=$(median_of "$column" ${ALL[dnsdist]})
  printf '%-14s %10s %10s %10s\n' "$column" "$s" "$d" "$(awk -v a="$s" -v b="$d" 'BEGIN {printf "%+.1f", a - b}')"
done
