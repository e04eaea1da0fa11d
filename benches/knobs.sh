#!/usr/bin/env bash
# The measurements behind tuning.md: one knob at a time, each next to the echo ceiling in the
# same run (benches/compare.sh does the runs). System settings changed here are restored on
# exit. Needs root for sysctl, /sys and nft.
#
# Usage: benches/knobs.sh EXPERIMENT
#   batch      skyline built with BATCH_SIZE 1, 8, 32 and 64 (dataplane/src/sys) side by side
#   placement  one pinned worker, one unpinned, two workers; server and client pinned apart,
#              then all of them free to run on both cores
#   buffers    queries lost at the server socket with rmem_max at Linux's default and at
#              4 MiB, for 100, 2,000 and 20,000 queries in flight
#   sysctl     busy polling (net.core.busy_read/busy_poll = 50) and RPS on lo, between two
#              baseline runs
#   conntrack  no netfilter hooks; conntrack on every packet; conntrack with NOTRACK for the
#              listener address; no hooks again (needs nft)
#   split      user and kernel CPU time per answered query of each server at peak load
# Knobs: ROUNDS [3], DURATION [5] seconds per run, BUILD [1] (0: use the release binaries and
# batch variants already built).
set -euo pipefail
cd "$(dirname "$0")/.."

EXPERIMENT="${1:-}"
BUILD_FIRST="${BUILD:-1}"
export ROUNDS="${ROUNDS:-3}" DURATION="${DURATION:-5}" BUILD=0 MIXES=a GENERATORS=loadgen PACED_MIXES=
VARIANTS=target/variants
DATA=target/knobs-data
mkdir -p "$VARIANTS"

case "$EXPERIMENT" in batch | placement | buffers | sysctl | conntrack | split) ;; *)
  sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
  exit 2
  ;;
esac
# The experiments run knotd, taskset, chrt and sysctl themselves, not only through compare.sh.
scripts/setup.sh bench
if [ "$BUILD_FIRST" = 1 ]; then cargo build --release --locked -p skyline -p skyline-bench --bins >&2; fi
[ -f "$DATA/a.txt" ] || target/release/skyline-dataset --out "$DATA"

# The harness's peak table rows for the A mix, prefixed with a label.
compare() { # label, then VAR=value settings for benches/compare.sh
  local label=$1; shift
  env "$@" RESULTS="target/knobs/$label" benches/compare.sh peak 2>/dev/null |
    grep -E '^\| a \| loadgen|^\| [a-z0-9-]+ \| a \| [0-9.]+ \|$' | sed "s/^/$label /"
}

batch() {
  # A copy of the working tree per constant; one target directory shared by the copies, so
  # only the data plane and the binary are rebuilt for each.
  local build=$PWD/target/knobs-build
  tree=$(mktemp -d)
  trap 'rm -rf "$tree"' EXIT
  tar --exclude=./target --exclude=./.git -cf - . | tar -xf - -C "$tree"
  for b in 1 8 32 64; do
    [ "$BUILD_FIRST" = 0 ] && [ -x "$VARIANTS/skyline-batch$b" ] && continue
    sed -i "s/pub const BATCH_SIZE: usize = [0-9]*;/pub const BATCH_SIZE: usize = $b;/" "$tree/dataplane/src/sys/mod.rs"
    (cd "$tree" && CARGO_TARGET_DIR="$build" cargo build --release -p skyline --bin skyline >&2)
    cp "$build/release/skyline" "$VARIANTS/skyline-batch$b"
  done
  compare batch SERVERS="echo skyline-batch1 skyline-batch8 skyline-batch32 skyline-batch64"
}

placement() {
  local bin=$PWD/target/release/skyline
  printf '#!/bin/sh\nexec %s "$@" --workers 1 --no-pin\n' "$bin" >"$VARIANTS/skyline-w1"
  printf '#!/bin/sh\nexec %s "$@" --workers 2\n' "$bin" >"$VARIANTS/skyline-w2"
  chmod +x "$VARIANTS/skyline-w1" "$VARIANTS/skyline-w2"
  compare pinned-apart SOCKETS=8 SKYLINE_FLAGS= SERVER_CPU=1 CLIENT_CPU=0 SERVERS="echo skyline-w1 skyline-w2"
  compare free SOCKETS=8 SKYLINE_FLAGS= SERVER_CPU=0,1 CLIENT_CPU=0,1 SERVERS="echo skyline-w1 skyline-w2"
}

buffers() {
  local port=15391 max window out drops0 drops1 hex
  pid=
  orig_r=$(sysctl -n net.core.rmem_max)
  orig_w=$(sysctl -n net.core.wmem_max)
  trap 'sysctl -qw net.core.rmem_max=$orig_r net.core.wmem_max=$orig_w; kill $pid 2>/dev/null || true' EXIT
  hex=$(printf '%04X' $port)
  for max in 212992 4194304; do
    for window in 100 2000 20000; do
      sysctl -qw net.core.rmem_max=$max net.core.wmem_max=$max
      chrt -f 1 taskset -c 1 target/release/skyline --records "$DATA/records.json" --domain skydns.local. \
        --addr 127.0.0.1:$port --workers 1 --no-pin 2>/dev/null &
      pid=$!
      sleep 1.5
      # The last column of /proc/net/udp is the socket's drop counter.
      drops0=$(awk -v p=":$hex" '$2 ~ p"$" {print $NF}' /proc/net/udp)
      out=$(chrt -f 1 taskset -c 0 target/release/skyline-loadgen -s 127.0.0.1:$port -d "$DATA/a.txt" \
        -l "$DURATION" -q $window -b 32 | grep '^RESULT')
      drops1=$(awk -v p=":$hex" '$2 ~ p"$" {print $NF}' /proc/net/udp)
      kill $pid
      wait $pid 2>/dev/null || true
      echo "rmem_max=$max window=$window server_socket_drops=$((drops1 - drops0))" \
        "$(grep -o 'qps=[0-9]* sent=[0-9]* answered=[0-9]* lost=[0-9]*' <<<"$out")" \
        "$(grep -o 'p99_us=[0-9.]*' <<<"$out")"
    done
  done
}

sysctl_knobs() {
  rps=/sys/class/net/lo/queues/rx-0/rps_cpus
  restore() { sysctl -qw net.core.busy_read=0 net.core.busy_poll=0; echo 0 >$rps; }
  trap restore EXIT
  compare baseline SERVERS="echo skyline"
  sysctl -qw net.core.busy_read=50 net.core.busy_poll=50
  compare busy-poll-50us SERVERS="echo skyline"
  restore
  echo 2 >$rps
  compare rps-to-server-cpu SERVERS="echo skyline"
  restore
  echo 1 >$rps
  compare rps-to-client-cpu SERVERS="echo skyline"
  restore
  compare baseline-again SERVERS="echo skyline"
}

conntrack() {
  command -v nft >/dev/null || { echo "nft is not installed (apt-get install nftables)" >&2; return 1; }
  trap 'nft delete table inet skyline_bench 2>/dev/null || true' EXIT
  compare no-hooks SERVERS="echo skyline"
  nft -f - <<'NFT'
table inet skyline_bench {
  chain in { type filter hook input priority 0; ct state established,related,new accept; }
  chain out { type filter hook output priority 0; ct state established,related,new accept; }
}
NFT
  compare conntrack SERVERS="echo skyline"
  nft -f - <<'NFT'
table inet skyline_bench {
  chain raw_pre { type filter hook prerouting priority raw; ip daddr 127.0.0.1 meta l4proto udp notrack; }
  chain raw_out { type filter hook output priority raw; ip daddr 127.0.0.1 meta l4proto udp notrack; }
}
NFT
  compare conntrack+notrack SERVERS="echo skyline"
  nft delete table inet skyline_bench
  compare no-hooks-again SERVERS="echo skyline"
}

split() {
  local port=15394 round s cmd u0 s0 u1 s1 out n
  work=$(mktemp -d)
  pid=""
  trap 'rm -rf "$work"; kill $pid 2>/dev/null || true' EXIT
  cat >"$work/knot.conf" <<CONF
server:
    listen: 127.0.0.1@$port
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
    rundir: $work
database:
    storage: $work
zone:
  - domain: skydns.local
    file: $PWD/$DATA/skydns.local.zone
CONF
  for round in $(seq "$ROUNDS"); do
    for s in echo skyline knot; do
      case $s in
      echo) cmd="target/release/skyline-echo --addr 127.0.0.1:$port" ;;
      skyline) cmd="target/release/skyline --records $DATA/records.json --domain skydns.local. --addr 127.0.0.1:$port --workers 1 --no-pin" ;;
      knot) cmd="knotd -c $work/knot.conf" ;;
      esac
      # shellcheck disable=SC2086 # the command line is split on purpose
      chrt -f 1 taskset -c 1 $cmd >/dev/null 2>&1 &
      pid=$!
      sleep 2
      taskset -a -p -c 1 $pid >/dev/null
      read -r u0 s0 < <(awk '{sub(/.*\) /, ""); print $12, $13}' /proc/$pid/stat)
      out=$(chrt -f 1 taskset -c 0 target/release/skyline-loadgen -s 127.0.0.1:$port -d "$DATA/a.txt" -l "$DURATION" | grep '^RESULT')
      read -r u1 s1 < <(awk '{sub(/.*\) /, ""); print $12, $13}' /proc/$pid/stat)
      kill $pid
      wait $pid 2>/dev/null || true
      n=$(sed 's/.*answered=\([0-9]*\).*/\1/' <<<"$out")
      awk -v s=$s -v r="$round" -v u=$((u1 - u0)) -v k=$((s1 - s0)) -v n="$n" -v hz="$(getconf CLK_TCK)" 'BEGIN {
        printf "r%d %-8s answered=%d user_us/query=%.3f kernel_us/query=%.3f user_share=%.1f%%\n",
          r, s, n, u * 1e6 / hz / n, k * 1e6 / hz / n, 100 * u / (u + k) }'
    done
  done
}

case "$EXPERIMENT" in
batch) batch ;;
placement) placement ;;
buffers) buffers ;;
sysctl) sysctl_knobs ;;
conntrack) conntrack ;;
split) split ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
esac
