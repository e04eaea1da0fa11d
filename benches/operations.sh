#!/usr/bin/env bash
# Operations under load: dnsperf keeps a steady stream of queries on skyline while the operator
# acts, and every query is counted. Each act gets a run of its own:
#   upgrade         SIGUSR2: the binary re-executes itself and takes over the sockets
#   failed-upgrade  SIGUSR2 with the binary replaced by one that exits at once; the old process
#                   keeps serving (the good binary is put back afterwards)
#   reload          SIGHUP with a changed --config file (hostmaster, cache size)
#   bad-reload      SIGHUP with an invalid --config file
#   drain           a second skyline on the same port (as a surge pod), then SIGTERM to the first:
#                   it drains while the second takes the new queries
#   tcp-upgrade     the upgrade again, with dnsperf over TCP (connections are re-opened by
#                   dnsperf as the old process closes them once answered)
# Lost queries are dnsperf's "Queries lost" (no reply within its 2 s timeout). Results:
# RESULTS/operations/operations.md, one row per act and round.
#
# Usage: benches/operations.sh   Knobs: ROUNDS [3], DURATION [8] seconds per run, RATE [20000]
# queries a second, ACT_AT [3] seconds into the run, ACTS [all of the above], SKYLINE_BIN
# [target/release/skyline], BUILD [1] (0: use the binary as it is), RESULTS [benches/results].
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/lib.sh

ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-8}"
RATE="${RATE:-20000}"
ACT_AT="${ACT_AT:-3}"
ACTS="${ACTS:-upgrade failed-upgrade reload bad-reload drain tcp-upgrade}"
SKYLINE_BIN="${SKYLINE_BIN:-target/release/skyline}"
BUILD="${BUILD:-1}"
RESULTS="${RESULTS:-benches/results}"

command -v dnsperf >/dev/null || { log "dnsperf is missing (Debian package dnsperf)"; exit 1; }
[ "$BUILD" = 1 ] && cargo build --release --bin skyline
out="$RESULTS/operations"
mkdir -p "$out"

# The data: 100 services under skydns.test., queried round-robin.
records="$work/records.json"
{
  printf '{"/skydns/config": {"domain": "skydns.test."}'
  for i in $(seq 0 99); do printf ', "/skydns/test/skydns/web%d": {"host": "10.0.%d.%d"}' "$i" $((i / 250)) $((i % 250 + 1)); done
  printf '}\n'
} >"$records"
for i in $(seq 0 99); do echo "web$i.skydns.test A"; done >"$work/queries.txt"

# The binary lives where an upgrade looks for it: a copy this script may replace.
mkdir -p "$work/bin"
install -m 0755 "$SKYLINE_BIN" "$work/bin/skyline"
printf '#!/bin/sh\nexit 1\n' >"$work/broken"
chmod 0755 "$work/broken"

config() { # hostmaster, cache size
  printf 'hostmaster = "%s"\n[cache]\nsize = "%s"\n' "$1" "$2" >"$work/skyline.toml.tmp"
  mv "$work/skyline.toml.tmp" "$work/skyline.toml"
}

start_skyline() { # name, port
  PORT[$1]=$2
  "$work/bin/skyline" --addr "127.0.0.1:$2" --records "$records" --config "$work/skyline.toml" \
    --workers 1 --no-pin --no-rec --drain 2s --pid-file "$work/$1.pid" >"$work/$1.log" 2>&1 &
  PID[$1]=$!
  wait_ready "$1" skydns.test. 20
}

# The PID serving now (an upgrade hands the role to a new process, which rewrites the file).
serving() { cat "$work/$1.pid"; }

act() { # act, server name
  local pid
  pid=$(serving "$2")
  case "$1" in
    upgrade | tcp-upgrade) kill -USR2 "$pid" ;;
    failed-upgrade)
      install -m 0755 "$work/broken" "$work/bin/skyline.new"
      mv "$work/bin/skyline.new" "$work/bin/skyline"
      kill -USR2 "$pid"
      sleep 2
      install -m 0755 "$SKYLINE_BIN" "$work/bin/skyline.new"
      mv "$work/bin/skyline.new" "$work/bin/skyline"
      ;;
    reload) config dns-admin.skydns.test. 32MiB && kill -HUP "$pid" ;;
    bad-reload) printf 'hostmaster = [\n' >"$work/skyline.toml" && kill -HUP "$pid" ;;
    drain)
      start_skyline surge "${PORT[$2]}"
      kill -TERM "$pid"
      ;;
  esac
}

# One field of dnsperf's summary.
field() { # file, label
  awk -v label="$2" '$0 ~ label {for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/) {print $i; exit}}' "$1"
}

table="$out/operations.md"
{
  echo "| act | round | sent | completed | lost | NOERROR | other rcodes |"
  echo "|---|---|---|---|---|---|---|"
} >"$table"
for round in $(seq "$ROUNDS"); do
  for act_name in $ACTS; do
    config ops.skydns.test. 16MiB
    port=$(free_port)
    start_skyline server "$port"
    mode=udp
    [ "$act_name" = tcp-upgrade ] && mode=tcp
    log "round $round: $act_name under $RATE q/s over $mode"
    "${prio[@]}" dnsperf -s 127.0.0.1 -p "$port" -m "$mode" -d "$work/queries.txt" -l "$DURATION" \
      -Q "$RATE" -c 8 -t 2 >"$work/dnsperf.txt" 2>&1 &
    perf_pid=$!
    sleep "$ACT_AT"
    act "$act_name" server
    wait "$perf_pid" || true
    sent=$(field "$work/dnsperf.txt" "Queries sent")
    completed=$(field "$work/dnsperf.txt" "Queries completed")
    lost=$(field "$work/dnsperf.txt" "Queries lost")
    noerror=$(awk '/Response codes/ {for (i = 1; i <= NF; i++) if ($i == "NOERROR") print $(i + 1)}' "$work/dnsperf.txt")
    other=$((completed - ${noerror:-0}))
    echo "| $act_name | $round | $sent | $completed | $lost | ${noerror:-0} | $other |" >>"$table"
    log "$act_name: sent $sent, completed $completed, lost $lost, other rcodes $other"
    # Whatever serves now (the upgraded process, the surge) is stopped by its PID file.
    for name in server surge; do
      [ -f "$work/$name.pid" ] && PID[$name]=$(cat "$work/$name.pid") && stop "$name"
      rm -f "$work/$name.pid"
    done
  done
done
cat "$table"
