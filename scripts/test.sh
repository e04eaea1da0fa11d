#!/usr/bin/env bash
# The whole test suite: installs what the tests need, then formatting, lints and every test of
# the workspace (unit, property, end-to-end against the real binary), then every fuzz target
# for a bounded time. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh test
cargo fmt --all -- --check
cargo fmt --manifest-path fuzz/Cargo.toml -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --all-targets --locked
scripts/fuzz.sh 30
