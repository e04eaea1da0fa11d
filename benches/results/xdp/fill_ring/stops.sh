#!/usr/bin/env bash
# During each leg's flood (-l 10): stops the server process in the bench's server namespace for
# $1 seconds, 8 times, one second apart; run at real-time priority so that the stops are as long
# as asked. Logs the measured length of each stop to $2.
for leg in $(seq "$3"); do
  for _ in $(seq 900); do pgrep -f "skyline-flood .* -l 10 " >/dev/null && break; sleep 0.05; done
  ns=$(ip netns list | awk '/skyline-xdp-srv/ {print $1; exit}')
  pid=$(ip netns pids "$ns" | head -1)
  sleep 1
  for _ in $(seq 8); do
    t0=$(date +%s%N); kill -STOP "$pid"; sleep "$1"; kill -CONT "$pid"; t1=$(date +%s%N)
    echo "leg $leg stop $(( (t1 - t0) / 1000 )) us" >>"$2"
    sleep 1
  done
  while pgrep -f "skyline-flood .* -l 10 " >/dev/null; do sleep 0.1; done
done
