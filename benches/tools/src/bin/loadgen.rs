//! `skyline-loadgen`: a batched DNS load generator. It keeps a window of queries outstanding
//! against one server, sending and receiving with one `sendmmsg`/`recvmmsg` per batch, so
//! that it costs far less CPU per query than the server it measures (dnsperf saturates its own
//! core first on a fast server). It reads dnsperf's query file format and prints a summary and
//! one `RESULT key=value ...` line for scripts.

use clap::Parser;
use skyline_bench::load::{run, Config};
use skyline_bench::query::{parse_file, QueryOptions};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Batched DNS load generator (see tuning.md).
#[derive(Debug, Parser)]
#[command(name = "skyline-loadgen")]
struct Args {
    /// Server to query.
    #[arg(short = 's', long, default_value = "127.0.0.1:53")]
    server: SocketAddr,
    /// Query file: one `name type` per line, as for dnsperf.
    #[arg(short = 'd', long)]
    queries: PathBuf,
    /// Seconds to send for.
    #[arg(short = 'l', long, default_value_t = 10.0)]
    duration: f64,
    /// Most queries outstanding at once.
    #[arg(short = 'q', long, default_value_t = 100)]
    window: usize,
    /// Most queries per sendmmsg (at most the data plane's BATCH_SIZE).
    #[arg(short = 'b', long, default_value_t = 16)]
    batch: usize,
    /// Target rate in queries per second instead of as fast as the window allows.
    #[arg(short = 'Q', long)]
    rate: Option<f64>,
    /// Seconds to wait for a reply before counting the query lost.
    #[arg(short = 't', long, default_value_t = 2.0)]
    timeout: f64,
    /// Client sockets (source ports), used in turn.
    #[arg(short = 'c', long, default_value_t = 1)]
    sockets: usize,
    /// Send each query of the file exactly once, then stop.
    #[arg(long)]
    once: bool,
    /// Poll without sleeping even when not paced.
    #[arg(long)]
    spin: bool,
    /// Clear the RD flag (dnsperf's -R).
    #[arg(short = 'R', long)]
    no_recursion: bool,
    /// Add an EDNS(0) OPT record advertising this UDP payload size.
    #[arg(long)]
    edns: Option<u16>,
    /// Write the latency histogram here: `low_ns,width_ns,count` per non-empty bucket.
    #[arg(long)]
    histogram: Option<PathBuf>,
    /// Seed of the message ID order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Send from this local address (e.g. 127.0.0.3), to stand for one client network.
    #[arg(long)]
    source: Option<std::net::IpAddr>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run_with(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("skyline-loadgen: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_with(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(&args.queries).map_err(|e| format!("{}: {e}", args.queries.display()))?;
    let options = QueryOptions {
        recursion_desired: !args.no_recursion,
        edns_payload: args.edns,
    };
    let queries = parse_file(&text, options).map_err(|e| format!("{}: {e}", args.queries.display()))?;
    let config = Config {
        server: args.server,
        duration: Duration::from_secs_f64(args.duration),
        window: args.window.max(1),
        batch: args.batch,
        rate: args.rate,
        timeout: Duration::from_secs_f64(args.timeout),
        sockets: args.sockets,
        once: args.once,
        spin: args.spin,
        seed: args.seed,
        source: args.source,
    };
    let report = run(&config, &queries)?;
    let h = &report.latency;
    let ms = |ns: u64| ns as f64 / 1e6;
    println!(
        "queries sent {}, answered {}, lost {}, mismatched {}, unexpected {}",
        report.sent, report.answered, report.lost, report.mismatched, report.unexpected
    );
    println!(
        "run time {:.3} s, {:.0} queries per second",
        report.elapsed.as_secs_f64(),
        report.qps()
    );
    println!(
        "latency ms: avg {:.3} p50 {:.3} p99 {:.3} p99.9 {:.3} max {:.3}",
        h.mean() / 1e6,
        ms(h.quantile(0.5)),
        ms(h.quantile(0.99)),
        ms(h.quantile(0.999)),
        ms(h.max())
    );
    println!("{}", report.machine_line());
    if let Some(path) = &args.histogram {
        let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
        writeln!(out, "low_ns,width_ns,count")?;
        for (low, width, count) in h.buckets() {
            writeln!(out, "{low},{width},{count}")?;
        }
        out.flush()?;
    }
    Ok(())
}
