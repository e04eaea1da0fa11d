#!/usr/bin/env bash
# Installs what skyline needs on Debian, for one purpose given as the argument:
#   build  protoc and its well-known types (etcd-client's build script), a C compiler (ring)
#   test   the above, plus etcd (the etcd source's tests), dig/kdig (independent DNS clients),
#          dnstap-read (bind9-dnsutils, the independent dnstap reader), delv (bind9-dnsutils,
#          the independent DNSSEC validator), dnssec-keygen (bind9-utils, the tests' keys),
#          knot (the reference server of the differential and forwarding tests), unbound and
#          bind9 (the caching resolvers tests/behind_cache.rs puts in front of skyline), a C++
#          compiler (libFuzzer, built by scripts/fuzz.sh), ip (iproute2), nft (nftables) and
#          iptables (the node-local set-up and skyline node-cache, tested inside network
#          namespaces), systemd-analyze (systemd), setcap (libcap2-bin) and setpriv
#          (util-linux) (the checks of deploy/systemd/)
#   bench  the above, plus dnsperf, taskset and chrt, dnsdist (the cache peer), valgrind
#          (instruction counts), curl (benches/upstream_faults.sh reads /metrics) and sysctl
#          (benches/knobs.sh)
# Beyond these the scripts and tests use only what every Debian system has (bash, coreutils,
# findutils, grep, sed, mawk, tar, getconf, apt-get); signals are sent from Rust, not by a
# `kill` program, which minimal systems lack. perf (Debian linux-perf) is optional: the bench
# that uses it says so and skips without it.
# Safe to run again: it installs only what is missing.
set -euo pipefail
purpose="${1:-test}"

need=()
command -v protoc >/dev/null || need+=(protobuf-compiler)
# protoc's well-known types (google/protobuf/*.proto), which etcd's protos import; a
# recommendation of protobuf-compiler, so --no-install-recommends would leave them out.
[ -e /usr/include/google/protobuf/descriptor.proto ] || need+=(libprotobuf-dev)
command -v cc >/dev/null || need+=(gcc)
if [ "$purpose" != build ]; then
  command -v etcd >/dev/null || need+=(etcd-server)
  command -v dig >/dev/null || need+=(dnsutils)
  # dnstap-read, the independent reader of the dnstap tests.
  command -v dnstap-read >/dev/null || need+=(bind9-dnsutils)
  command -v delv >/dev/null || need+=(bind9-dnsutils)
  # dnssec-keygen makes the keys of the DNSSEC tests.
  command -v dnssec-keygen >/dev/null || need+=(bind9-utils)
  command -v kdig >/dev/null || need+=(knot-dnsutils)
  command -v unbound >/dev/null || [ -x /usr/sbin/unbound ] || need+=(unbound)
  command -v named >/dev/null || [ -x /usr/sbin/named ] || need+=(bind9)
  command -v knotd >/dev/null || [ -x /usr/sbin/knotd ] || need+=(knot)
  command -v c++ >/dev/null || need+=(g++)
  command -v ip >/dev/null || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || need+=(iproute2)
  command -v nft >/dev/null || [ -x /usr/sbin/nft ] || need+=(nftables)
  command -v iptables >/dev/null || [ -x /usr/sbin/iptables ] || need+=(iptables)
  command -v systemd-analyze >/dev/null || need+=(systemd)
  command -v setcap >/dev/null || [ -x /usr/sbin/setcap ] || need+=(libcap2-bin)
  command -v setpriv >/dev/null || need+=(util-linux)
fi
if [ "$purpose" = bench ]; then
  command -v dnsperf >/dev/null || need+=(dnsperf)
  { command -v taskset && command -v chrt; } >/dev/null || need+=(util-linux)
  command -v dnsdist >/dev/null || need+=(dnsdist)
  command -v callgrind_control >/dev/null || need+=(valgrind)
  command -v curl >/dev/null || need+=(curl)
  command -v sysctl >/dev/null || [ -x /usr/sbin/sysctl ] || need+=(procps)
fi
[ ${#need[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
# Keep apt from starting the packaged servers (etcd, knot) as system services on their ports.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
  $sudo chmod +x /usr/sbin/policy-rc.d
  trap '$sudo rm -f /usr/sbin/policy-rc.d' EXIT
fi
echo "installing: ${need[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
