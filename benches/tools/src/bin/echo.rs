//! `skyline-echo`: the throughput ceiling. It answers every datagram by sending it back with
//! the QR bit set, through the same batched packet path as a skyline worker, doing no DNS work;
//! a server's rate is quoted as a fraction of this one's on the same machine in the same run.

use clap::Parser;
use skyline_bench::echo::Echo;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// recvmmsg/sendmmsg echo responder (see tuning.md).
#[derive(Debug, Parser)]
#[command(name = "skyline-echo")]
struct Args {
    /// Address to answer on.
    #[arg(long, default_value = "127.0.0.1:5300")]
    addr: SocketAddr,
    /// Stop after this many seconds (default: run until killed).
    #[arg(long)]
    seconds: Option<f64>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let until = args.seconds.map(|s| Instant::now() + Duration::from_secs_f64(s));
    let result = Echo::bind(args.addr).and_then(|mut echo| {
        eprintln!("skyline-echo: answering on {}", echo.local_addr()?);
        echo.serve(until)
    });
    match result {
        Ok(echoed) => {
            eprintln!("skyline-echo: {echoed} datagrams echoed");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("skyline-echo: {e}");
            ExitCode::FAILURE
        }
    }
}
