//! `skyline-report`: reduces the harness's per-run rows to medians and ratios, checks the
//! targets, and draws the picture. `summary` writes `summary.md`, `summary.json` and
//! `compare.svg`; `median` prints one median for the harness to pace later runs with.

use clap::{Parser, Subcommand};
use skyline_bench::plot::{draw, Bars, Curve, Distribution};
use skyline_bench::report::{self, markdown, medians, per_query, Inputs, Key, Table, CEILING, PEER, SUBJECT};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Summaries of a side-by-side comparison (see tuning.md).
#[derive(Debug, Parser)]
#[command(name = "skyline-report")]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write summary.md, summary.json and compare.svg into --out, and print the Markdown.
    Summary {
        /// Per-run rows written by benches/compare.sh.
        #[arg(long)]
        runs: PathBuf,
        /// Callgrind rows: server,mix,instructions,answered.
        #[arg(long)]
        callgrind: Option<PathBuf>,
        /// Directory of latency histograms named MODE-MIX-GENERATOR-SERVER-rROUND.csv.
        #[arg(long)]
        latency: Option<PathBuf>,
        /// Syscall rows: server,mix,syscalls,answered.
        #[arg(long)]
        syscalls: Option<PathBuf>,
        /// The word `pass` or `fail` from the data plane's zero-allocation tests.
        #[arg(long)]
        allocations: Option<PathBuf>,
        /// Where to write the summary files.
        #[arg(long)]
        out: PathBuf,
    },
    /// Print the median of one metric over the matching runs (nan when none match).
    Median {
        /// Per-run rows written by benches/compare.sh.
        #[arg(long)]
        runs: PathBuf,
        /// `peak` or `paced`.
        #[arg(long, default_value = "peak")]
        mode: String,
        /// Query mix.
        #[arg(long, default_value = "a")]
        mix: String,
        /// Load generator.
        #[arg(long, default_value = "loadgen")]
        generator: String,
        /// Server.
        #[arg(long)]
        server: String,
        /// Column of the runs file.
        #[arg(long, default_value = "qps")]
        metric: String,
    },
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("skyline-report: {e}");
            ExitCode::FAILURE
        }
    }
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    match args.command {
        Command::Median {
            runs,
            mode,
            mix,
            generator,
            server,
            metric,
        } => {
            let table = Table::parse(&read(&runs)?);
            let key = Key {
                mode,
                mix,
                generator,
                server,
            };
            let value = medians(&table).get(&key).map_or(f64::NAN, |m| m.get(&metric));
            println!("{value}");
        }
        Command::Summary {
            runs,
            callgrind,
            latency,
            syscalls,
            allocations,
            out,
        } => {
            let counts = |path: Option<PathBuf>, column: &str| -> Result<_, String> {
                Ok(match path {
                    Some(path) => per_query(&Table::parse(&read(&path)?), column),
                    None => BTreeMap::new(),
                })
            };
            let inputs = Inputs {
                medians: medians(&Table::parse(&read(&runs)?)),
                instructions: counts(callgrind, "instructions")?,
                syscalls: counts(syscalls, "syscalls")?,
                allocations: match allocations {
                    Some(path) => Some(read(&path)?.trim() == "pass"),
                    None => None,
                },
            };
            std::fs::create_dir_all(&out)?;
            let md = markdown(&inputs);
            std::fs::write(out.join("summary.md"), &md)?;
            let json = serde_json::to_string_pretty(&report::json(&inputs))?;
            std::fs::write(out.join("summary.json"), json + "\n")?;
            let (caption, curves) = match &latency {
                Some(dir) => latency_curves(dir)?,
                None => (String::new(), Vec::new()),
            };
            draw(
                &out.join("compare.svg"),
                "skyline vs Knot DNS vs echo ceiling — 1 server core, loopback",
                &bars(&inputs.medians),
                &curves,
                &caption,
            )?;
            print!("{md}");
        }
    }
    Ok(())
}

/// Mixes and generators in report order, then anything else alphabetically.
fn rank(order: &[&str], value: &str) -> (usize, String) {
    let position = order.iter().position(|o| *o == value).unwrap_or(order.len());
    (position, value.to_string())
}

fn bars(m: &BTreeMap<Key, report::Medians>) -> Bars {
    let mixes = ["a", "nxdomain", "srv", "mixedcase"];
    let generators = ["loadgen", "dnsperf"];
    let servers = [CEILING, SUBJECT, PEER];
    let peak: Vec<&Key> = m.keys().filter(|k| k.mode == "peak").collect();
    let mut groups: Vec<(String, String)> = peak.iter().map(|k| (k.mix.clone(), k.generator.clone())).collect();
    groups.sort_by_key(|(mix, generator)| (rank(&mixes, mix), rank(&generators, generator)));
    groups.dedup();
    let mut names: Vec<String> = peak.iter().map(|k| k.server.clone()).collect();
    names.sort_by_key(|s| rank(&servers, s));
    names.dedup();
    let series = names
        .iter()
        .map(|server| {
            let values = groups
                .iter()
                .map(|(mix, generator)| {
                    let key = Key {
                        mode: "peak".into(),
                        mix: mix.clone(),
                        generator: generator.clone(),
                        server: server.clone(),
                    };
                    m.get(&key).map_or(f64::NAN, |v| v.get("qps"))
                })
                .collect();
            (server.clone(), values)
        })
        .collect();
    Bars {
        groups: groups.iter().map(|(mix, g)| format!("{mix}/{g}")).collect(),
        series,
    }
}

/// Merged latency distributions of the paced A-mix runs (the peak ones when there are none),
/// one curve per server.
fn latency_curves(dir: &Path) -> Result<(String, Vec<Curve>), Box<dyn std::error::Error>> {
    let mut by_run: BTreeMap<(String, String), Distribution> = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        // MODE-MIX-loadgen-SERVER-rROUND: modes and servers may hold dashes, mixes do not.
        let Some((mode, server)) = name
            .split_once("-loadgen-")
            .and_then(|(left, right)| Some((left.strip_suffix("-a")?, right.rsplit_once('-')?.0)))
        else {
            continue;
        };
        by_run
            .entry((mode.to_string(), server.to_string()))
            .or_default()
            .add_csv(&read(&path)?);
    }
    let has = |wanted: &str| by_run.keys().any(|(mode, _)| mode == wanted);
    let (mode, caption) = if has("paced-common") {
        (
            "paced-common",
            "latency at the same offered load (80 % of knot's peak), A mix, all rounds",
        )
    } else if has("paced") {
        ("paced", "latency at 80 % of each server's own peak, A mix, all rounds")
    } else {
        ("peak", "latency at peak load, A mix, all rounds")
    };
    let mut curves: Vec<Curve> = by_run
        .iter()
        .filter(|((m, _), _)| m == mode)
        .map(|((_, server), d)| (server.clone(), d.exceedance()))
        .collect();
    curves.sort_by_key(|(s, _)| rank(&[CEILING, SUBJECT, PEER], s));
    Ok((format!("{caption} (lower and further left is better)"), curves))
}
