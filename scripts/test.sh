#!/usr/bin/env bash
# The whole test suite: installs what the tests need, then formatting, lints and every test of
# the workspace (unit, property, end-to-end against the real binary), then every fuzz target
# for a bounded time. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
# A clean clone gains nothing from incremental state, which is as large as the build itself.
if [ "${CI:-}" = true ]; then
  export CARGO_INCREMENTAL=0
fi

scripts/setup.sh test
cargo fmt --all -- --check
cargo fmt --manifest-path fuzz/Cargo.toml -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --all-targets --locked
if [ "${CI:-}" = true ]; then
  # A clean clone builds everything once: the workspace's test build is not needed again, and
  # the sanitizer build of the fuzz targets must fit beside what is left on the CI disk.
  rm -rf target/debug
fi
scripts/fuzz.sh 30
