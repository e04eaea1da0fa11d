//! `skyline-flood`: an open-loop flood from one or many source addresses, for the abuse
//! benchmark (`benches/abuse.sh`): it never waits for a reply and counts those that come back.

use clap::Parser;
use skyline_bench::flood::{flood, spread_sources, FloodConfig};
use skyline_bench::query::{parse_file, QueryOptions};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Open-loop UDP DNS flood (see benches/abuse.sh).
#[derive(Debug, Parser)]
#[command(name = "skyline-flood")]
struct Args {
    /// Server to flood.
    #[arg(short = 's', long)]
    server: SocketAddr,
    /// Query file: one `name type` per line, as for dnsperf.
    #[arg(short = 'd', long)]
    queries: PathBuf,
    /// Seconds to send for.
    #[arg(short = 'l', long, default_value_t = 10.0)]
    duration: f64,
    /// Send from this address (repeatable): a forged source, such as a victim's.
    #[arg(long)]
    source: Vec<IpAddr>,
    /// Send from this many addresses, each in a /24 of its own (127.100.0.1, 127.100.1.1, …).
    #[arg(long, conflicts_with = "source")]
    spread: Option<usize>,
    /// Queries a second (default: as fast as the kernel takes them).
    #[arg(short = 'Q', long)]
    rate: Option<f64>,
    /// Queries per sendmmsg.
    #[arg(short = 'b', long, default_value_t = 16)]
    batch: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = std::fs::read_to_string(&args.queries)
        .map_err(|e| format!("{}: {e}", args.queries.display()))
        .and_then(|text| parse_file(&text, QueryOptions::default()).map_err(|e| e.to_string()))
        .and_then(|queries| {
            let sources = match args.spread {
                Some(count) => spread_sources(count),
                None if args.source.is_empty() => vec![IpAddr::from([127, 0, 0, 1])],
                None => args.source.clone(),
            };
            let config = FloodConfig {
                server: args.server,
                duration: Duration::from_secs_f64(args.duration),
                sources,
                rate: args.rate,
                batch: args.batch,
            };
            flood(&config, &queries).map_err(|e| e.to_string())
        });
    match result {
        Ok(report) => {
            println!(
                "RESULT sent={} qps={:.0} replies={} truncated={} reply_bytes={} seconds={:.3}",
                report.sent,
                report.qps(),
                report.replies,
                report.truncated,
                report.reply_bytes,
                report.elapsed.as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("skyline-flood: {e}");
            ExitCode::FAILURE
        }
    }
}
