//! `skyline-dataset`: writes the benchmark's data set — the same records as a skyline records
//! file and as a zone file — and one query file per mix, deterministically from a seed.

use clap::Parser;
use skyline_bench::dataset::{Mix, Spec};
use std::path::PathBuf;
use std::process::ExitCode;

/// Data set and query files for the side-by-side comparison (see tuning.md).
#[derive(Debug, Parser)]
#[command(name = "skyline-dataset")]
struct Args {
    /// Directory to write records.json, <domain>.zone and <mix>.txt into.
    #[arg(long)]
    out: PathBuf,
    /// The zone.
    #[arg(long, default_value = "skydns.local")]
    domain: String,
    /// Services of four IPv4 instances each (every tenth also has an IPv6 one and a text).
    #[arg(long, default_value_t = 2500)]
    services: usize,
    /// Queries per mix file.
    #[arg(long, default_value_t = 100_000)]
    queries: usize,
    /// Seed of the query files.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match write(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("skyline-dataset: {e}");
            ExitCode::FAILURE
        }
    }
}

fn write(args: &Args) -> std::io::Result<()> {
    let spec = Spec {
        domain: args.domain.trim_end_matches('.').to_string(),
        services: args.services.max(1),
    };
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(args.out.join("records.json"), spec.records_json())?;
    std::fs::write(args.out.join(format!("{}.zone", spec.domain)), spec.zone_file())?;
    for mix in Mix::ALL {
        let text = spec.queries(mix, args.queries, args.seed);
        std::fs::write(args.out.join(format!("{}.txt", mix.name())), text)?;
    }
    eprintln!(
        "skyline-dataset: {} address names in {} services, {} queries per mix, in {}",
        spec.address_names(),
        spec.services,
        args.queries,
        args.out.display()
    );
    Ok(())
}
