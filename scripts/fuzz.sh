#!/usr/bin/env bash
# Runs every fuzz target (fuzz/fuzz_targets/) for a bounded time and fails on any crash, panic,
# hang, leak or runaway memory. Usage:
#   scripts/fuzz.sh                 30 s per target (what scripts/test.sh runs)
#   scripts/fuzz.sh 3600            an hour per target
#   scripts/fuzz.sh 600 answer      only the answer target, ten minutes
# Targets are built as cargo-fuzz builds by default: optimised, with debug assertions and
# overflow checks, under AddressSanitizer (which also finds leaks). The stable toolchain needs
# RUSTC_BOOTSTRAP=1 for the sanitizer flags.
# Seeds are read from fuzz/corpus/<target>/ and never written; inputs a run discovers are kept
# in fuzz/target/corpus/<target>/ for the next run. A failing input is saved under
# fuzz/artifacts/<target>/ and printed; keep it as a regression test next to the code it broke.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-30}"
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(parse roundtrip answer record upstream)

# A single input taking longer than this is a hang.
hang_seconds=10
# Memory beyond this is a failure (the fixture snapshot takes a few MiB).
rss_limit_mb=2048

command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
export RUSTC_BOOTSTRAP=1

cargo fuzz build
summary=()
for target in "${targets[@]}"; do
  scratch="fuzz/target/corpus/$target"
  log="fuzz/target/$target.log"
  mkdir -p "$scratch"
  echo "fuzzing $target for ${seconds}s" >&2
  start=$(date +%s)
  if ! cargo fuzz run "$target" "$scratch" "fuzz/corpus/$target" -- \
      -max_total_time="$seconds" -timeout="$hang_seconds" -rss_limit_mb="$rss_limit_mb" \
      -detect_leaks=1 -print_final_stats=1 >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz target $target failed: see $log and fuzz/artifacts/$target/" >&2
    exit 1
  fi
  elapsed=$(($(date +%s) - start))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  corpus=$(find "$scratch" "fuzz/corpus/$target" -type f | wc -l)
  summary+=("$(printf '%-10s %12s executions in %4ss, corpus %s inputs' "$target" "${runs:-?}" "$elapsed" "$corpus")")
done
printf '%s\n' "${summary[@]}"
