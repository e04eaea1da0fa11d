#!/usr/bin/env bash
# Runs skyline on its embedded default: the example records file, on 127.0.0.1:1053 (a port an
# ordinary user can bind). Extra arguments are passed to skyline, e.g. `--workers 2`.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh build
exec cargo run --release --locked -- --records examples/records.json --addr 127.0.0.1:1053 "$@"
