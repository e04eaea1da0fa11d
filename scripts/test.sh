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
# Documentation links must resolve, private items included.
RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links" \
  cargo doc --workspace --no-deps --document-private-items --locked
# The portable I/O (one recv_from/send_to per datagram, for systems without recvmmsg) compiles,
# checked on Linux through the cfg that selects it; its own target directory keeps the main
# build's artifacts valid.
RUSTFLAGS="--cfg skyline_portable_io -D warnings" \
  cargo check -p skyline-dataplane --all-targets --locked --target-dir target/portable-io
# The declared minimum Rust version builds the workspace.
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
rustup toolchain install "$msrv" --profile minimal >/dev/null
cargo "+$msrv" check --workspace --all-targets --locked --target-dir target/msrv
if [ "${CI:-}" = true ]; then
  # A clean clone builds everything once: the workspace's test build is not needed again, and
  # the sanitizer build of the fuzz targets must fit beside what is left on the CI disk.
  rm -rf target/debug target/portable-io target/msrv target/doc
fi
scripts/fuzz.sh 30
