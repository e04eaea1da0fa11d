//! The pieces of skyline's side-by-side benchmark tools (see `benches/compare.sh` and
//! `tuning.md`): query files, outstanding-query bookkeeping, latency histograms, pacing, the
//! load generator's engine, an open-loop flood, the echo ceiling, a slowed upstream (a delaying relay), the shared
//! data set and the result report.
//!
//! Packets go through the data plane's own `PacketIo`/`KernelUdp` batch path, so the tools
//! measure with the same syscalls the server uses and hold no `unsafe` code of their own.

pub mod cpu;
pub mod dataset;
pub mod delay;
pub mod echo;
pub mod flood;
pub mod histogram;
pub mod inflight;
pub mod load;
pub mod pace;
pub mod plot;
pub mod query;
pub mod report;
pub mod rng;
