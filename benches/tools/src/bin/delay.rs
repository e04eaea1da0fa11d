//! `skyline-delay`: a slowed upstream. It relays DNS over UDP to a real server, holding each
//! query for a fixed delay first (see `skyline_bench::delay`).

use clap::Parser;
use std::net::{SocketAddr, UdpSocket};
use std::process::ExitCode;
use std::time::Duration;

/// UDP relay that delays every query (see tuning.md, "Upstream faults under load").
#[derive(Debug, Parser)]
#[command(name = "skyline-delay")]
struct Args {
    /// Address to take queries on.
    #[arg(long)]
    addr: SocketAddr,
    /// The server to pass them to.
    #[arg(long)]
    upstream: SocketAddr,
    /// Milliseconds each query is held.
    #[arg(long)]
    delay_ms: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = UdpSocket::bind(args.addr).and_then(|front| {
        eprintln!(
            "skyline-delay: {} -> {} after {} ms",
            front.local_addr()?,
            args.upstream,
            args.delay_ms
        );
        skyline_bench::delay::relay(front, args.upstream, Duration::from_millis(args.delay_ms))
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("skyline-delay: {e}");
            ExitCode::FAILURE
        }
    }
}
