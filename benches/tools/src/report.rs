//! Turning the harness's per-run rows into the numbers worth quoting: medians over the
//! alternating rounds, ratios between servers measured in the same run, and the issue's
//! targets checked against them.
//!
//! Single runs on a shared two-core machine vary by 10–25 %; only medians of runs interleaved
//! in time, and ratios of such medians, are compared.

use std::collections::BTreeMap;
use std::fmt::Write;

/// The server whose numbers are judged.
pub const SUBJECT: &str = "skyline";
/// The reference peer.
pub const PEER: &str = "knot";
/// The no-DNS-work responder that stands for what the kernel allows.
pub const CEILING: &str = "echo";

/// A CSV table with a header row, values kept as text.
#[derive(Debug, Clone, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// Parses comma-separated text whose first line names the columns. Fields hold no commas
    /// or quotes (the harness writes numbers and plain names only).
    pub fn parse(text: &str) -> Table {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let split = |l: &str| l.split(',').map(|f| f.trim().to_string()).collect::<Vec<_>>();
        let header = lines.next().map(split).unwrap_or_default();
        Table {
            header,
            rows: lines.map(split).collect(),
        }
    }

    /// The rows, each a map from column name to text.
    pub fn records(&self) -> impl Iterator<Item = Record<'_>> {
        self.rows.iter().map(|row| Record {
            header: &self.header,
            row,
        })
    }
}

/// One row of a [`Table`].
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    header: &'a [String],
    row: &'a [String],
}

impl Record<'_> {
    /// The text of column `name`, empty when absent.
    pub fn text(&self, name: &str) -> &str {
        self.header
            .iter()
            .position(|h| h == name)
            .and_then(|i| self.row.get(i))
            .map_or("", String::as_str)
    }

    /// The number in column `name`; NaN when absent or not a number.
    pub fn number(&self, name: &str) -> f64 {
        self.text(name).parse().unwrap_or(f64::NAN)
    }
}

/// The median of the values that are numbers; NaN when there are none.
pub fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.into_iter().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// Which runs a median is taken over.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    /// `peak` (as fast as the window allows) or `paced` (a fixed offered rate).
    pub mode: String,
    /// The query mix.
    pub mix: String,
    /// `loadgen` or `dnsperf`.
    pub generator: String,
    /// `echo`, `skyline`, `knot`, ...
    pub server: String,
}

/// The metrics of the runs file whose medians are reported.
pub const METRICS: [&str; 11] = [
    "rate",
    "qps",
    "answered",
    "lost",
    "avg_us",
    "p50_us",
    "p99_us",
    "p999_us",
    "server_cpu_us_per_query",
    "client_cpu_us_per_query",
    "avg_reply_bytes",
];

/// Per group of runs: how many, the median of each metric, and each round's values.
#[derive(Debug, Clone, Default)]
pub struct Medians {
    /// Runs in the group.
    pub runs: usize,
    /// Metric name → median.
    pub values: BTreeMap<String, f64>,
    /// Round → metric name → value, for ratios between servers run in the same round.
    pub rounds: BTreeMap<String, BTreeMap<String, f64>>,
}

impl Medians {
    /// The median of `metric`; NaN when unknown.
    pub fn get(&self, metric: &str) -> f64 {
        self.values.get(metric).copied().unwrap_or(f64::NAN)
    }
}

/// The median and range of per-round ratios.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Median over the rounds.
    pub median: f64,
    /// Smallest ratio of a round.
    pub min: f64,
    /// Largest ratio of a round.
    pub max: f64,
    /// Rounds in which both were measured.
    pub pairs: usize,
}

impl Spread {
    /// "median" alone for one pair, "median (min–max)" for several; "–" when unmeasured.
    pub fn cell(&self) -> String {
        match self.pairs {
            0 => "–".to_string(),
            1 => format!("{:.3}", self.median),
            _ => format!("{:.3} ({:.2}–{:.2})", self.median, self.min, self.max),
        }
    }
}

/// `metric` of `a` over `metric` of `b`, round by round. Runs of one round are minutes apart at
/// most, so pairing them cancels the slow drift of a shared machine that a ratio of medians
/// over all rounds would keep.
pub fn paired(a: &Medians, b: &Medians, metric: &str) -> Spread {
    let ratios: Vec<f64> = a
        .rounds
        .iter()
        .filter_map(|(round, values)| {
            let x = values.get(metric)?;
            let y = b.rounds.get(round)?.get(metric)?;
            Some(ratio(*x, *y))
        })
        .filter(|r| !r.is_nan())
        .collect();
    Spread {
        median: median(ratios.iter().copied()),
        min: ratios.iter().copied().fold(f64::NAN, f64::min),
        max: ratios.iter().copied().fold(f64::NAN, f64::max),
        pairs: ratios.len(),
    }
}

/// Groups the runs by [`Key`] and takes the median of every metric.
pub fn medians(runs: &Table) -> BTreeMap<Key, Medians> {
    let mut groups: BTreeMap<Key, Vec<Record<'_>>> = BTreeMap::new();
    for r in runs.records() {
        let key = Key {
            mode: r.text("mode").to_string(),
            mix: r.text("mix").to_string(),
            generator: r.text("generator").to_string(),
            server: r.text("server").to_string(),
        };
        groups.entry(key).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|(key, records)| {
            let values = METRICS
                .iter()
                .map(|m| (m.to_string(), median(records.iter().map(|r| r.number(m)))))
                .collect();
            let runs = records.len();
            let rounds = records
                .iter()
                .map(|r| {
                    let values = METRICS.iter().map(|m| (m.to_string(), r.number(m))).collect();
                    (r.text("round").to_string(), values)
                })
                .collect();
            (key, Medians { runs, values, rounds })
        })
        .collect()
}

/// Counts per answered query by (server, mix) from rows of `server,mix,<column>,answered` —
/// callgrind's instructions, or syscalls — the median over repetitions.
pub fn per_query(table: &Table, column: &str) -> BTreeMap<(String, String), f64> {
    let mut groups: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for r in table.records() {
        let key = (r.text("server").to_string(), r.text("mix").to_string());
        groups
            .entry(key)
            .or_default()
            .push(r.number(column) / r.number("answered"));
    }
    groups.into_iter().map(|(k, v)| (k, median(v))).collect()
}

/// A target of the issue, checked.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// What is required.
    pub target: String,
    /// What was measured, in words.
    pub measured: String,
    /// Met, not met, or `None` when not measured in this run.
    pub met: Option<bool>,
}

fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        f64::NAN
    } else {
        a / b
    }
}

fn key(mode: &str, mix: &str, generator: &str, server: &str) -> Key {
    Key {
        mode: mode.into(),
        mix: mix.into(),
        generator: generator.into(),
        server: server.into(),
    }
}

/// Everything a summary is made from.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// Medians of the load runs.
    pub medians: BTreeMap<Key, Medians>,
    /// Callgrind instructions per query by (server, mix).
    pub instructions: BTreeMap<(String, String), f64>,
    /// Syscalls per query by (server, mix).
    pub syscalls: BTreeMap<(String, String), f64>,
    /// Whether the data plane's zero-allocation tests passed, when they were run.
    pub allocations: Option<bool>,
}

/// Checks the targets against the medians, instruction counts and allocation tests.
pub fn verdicts(inputs: &Inputs) -> Vec<Verdict> {
    let (medians, instructions) = (&inputs.medians, &inputs.instructions);
    let pair = |mode: &str, mix: &str, a: &str, b: &str, metric: &str| {
        let of = |server: &str| medians.get(&key(mode, mix, "loadgen", server));
        match (of(a), of(b)) {
            (Some(a), Some(b)) => paired(a, b, metric),
            _ => paired(&Medians::default(), &Medians::default(), metric),
        }
    };
    let judged = |s: Spread, ok: bool| if s.pairs == 0 { None } else { Some(ok) };
    let mut out = Vec::new();

    let of_ceiling = pair("peak", "a", SUBJECT, CEILING, "qps");
    out.push(Verdict {
        target: "A mix, own load generator: QPS >= 0.95 x echo ceiling".into(),
        measured: format!("{} x echo", of_ceiling.cell()),
        met: judged(of_ceiling, of_ceiling.median >= 0.95),
    });
    for (mix, want) in [("a", 1.15), ("nxdomain", 1.1), ("srv", 1.1)] {
        let r = pair("peak", mix, SUBJECT, PEER, "qps");
        out.push(Verdict {
            target: format!("{mix} mix, own load generator: QPS >= {want} x knot"),
            measured: format!("{} x knot", r.cell()),
            met: judged(r, r.median >= want),
        });
    }
    let cpu = pair("peak", "a", SUBJECT, CEILING, "server_cpu_us_per_query");
    out.push(Verdict {
        target: "A mix: server CPU per answered query <= 1.07 x echo's".into(),
        measured: format!("{} x echo", cpu.cell()),
        met: judged(cpu, cpu.median <= 1.07),
    });
    let ins = instructions
        .get(&(SUBJECT.to_string(), "a".to_string()))
        .copied()
        .unwrap_or(f64::NAN);
    out.push(Verdict {
        target: "A mix: <= 1,000 user-space instructions per answered query (callgrind)".into(),
        measured: format!("{ins:.0} instructions per query"),
        met: if ins.is_nan() { None } else { Some(ins <= 1000.0) },
    });
    out.push(Verdict {
        target: "0 heap allocations per answered query".into(),
        measured: match inputs.allocations {
            Some(true) => "dataplane tests alloc and udp_alloc pass".into(),
            Some(false) => "dataplane allocation tests fail".into(),
            None => "not run".into(),
        },
        met: inputs.allocations,
    });
    for (mode, load) in [
        ("paced", "80 % of each server's own peak"),
        ("paced-common", "80 % of knot's peak for both"),
    ] {
        let p99 = pair(mode, "a", SUBJECT, PEER, "p99_us");
        out.push(Verdict {
            target: format!("A mix at {load}: p99 latency <= knot's"),
            measured: format!("{} x knot's p99", p99.cell()),
            met: judged(p99, p99.median <= 1.0),
        });
    }
    out
}

fn cell(v: f64, decimals: usize) -> String {
    if v.is_nan() {
        "–".to_string()
    } else {
        format!("{v:.decimals$}")
    }
}

/// The summary as Markdown tables: peak runs, paced runs, instruction counts, targets.
pub fn markdown(inputs: &Inputs) -> String {
    let (medians, instructions) = (&inputs.medians, &inputs.instructions);
    let mut out = String::new();
    let peer_of = |k: &Key, server: &str| {
        medians.get(&Key {
            server: server.into(),
            ..k.clone()
        })
    };
    let _ = writeln!(
        out,
        "### Peak load (medians)\n\nRatios are medians of per-round ratios (range in brackets): servers of one round ran minutes apart.\n\n| mix | generator | server | runs | QPS | x echo | skyline/knot | avg µs | p99 µs | lost | server CPU µs/query | CPU x echo | client CPU µs/query |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    let none = Medians::default();
    for (k, m) in medians.iter().filter(|(k, _)| k.mode == "peak") {
        let echo = peer_of(k, CEILING).unwrap_or(&none);
        let of_echo = paired(m, echo, "qps");
        let cpu_of_echo = paired(m, echo, "server_cpu_us_per_query");
        let vs_peer = if k.server == SUBJECT {
            paired(m, peer_of(k, PEER).unwrap_or(&none), "qps")
        } else {
            paired(m, &none, "qps")
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            k.mix,
            k.generator,
            k.server,
            m.runs,
            cell(m.get("qps"), 0),
            of_echo.cell(),
            vs_peer.cell(),
            cell(m.get("avg_us"), 1),
            cell(m.get("p99_us"), 1),
            cell(m.get("lost"), 0),
            cell(m.get("server_cpu_us_per_query"), 3),
            cpu_of_echo.cell(),
            cell(m.get("client_cpu_us_per_query"), 3),
        );
    }
    let _ = writeln!(
        out,
        "\n### Paced load (medians)\n\n`paced`: each server at 80 % of its own median peak; `paced-common`: every server at 80 % of knot's.\n\n| load | mix | server | runs | offered QPS | answered QPS | avg µs | p50 µs | p99 µs | p99.9 µs | server CPU µs/query | p99 skyline/knot |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for (k, m) in medians.iter().filter(|(k, _)| k.mode.starts_with("paced")) {
        let vs_peer = if k.server == SUBJECT {
            paired(m, peer_of(k, PEER).unwrap_or(&none), "p99_us")
        } else {
            paired(m, &none, "p99_us")
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            k.mode,
            k.mix,
            k.server,
            m.runs,
            cell(m.get("rate"), 0),
            cell(m.get("qps"), 0),
            cell(m.get("avg_us"), 1),
            cell(m.get("p50_us"), 1),
            cell(m.get("p99_us"), 1),
            cell(m.get("p999_us"), 1),
            cell(m.get("server_cpu_us_per_query"), 3),
            vs_peer.cell(),
        );
    }
    for (title, counts, decimals) in [
        (
            "User-space instructions per answered query (callgrind)",
            instructions,
            0,
        ),
        ("Syscalls per answered query (perf, peak load)", &inputs.syscalls, 3),
    ] {
        if counts.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n### {title}\n\n| server | mix | per query |\n|---|---|---|");
        for ((server, mix), v) in counts {
            let _ = writeln!(out, "| {server} | {mix} | {} |", cell(*v, decimals));
        }
    }
    let _ = writeln!(out, "\n### Targets\n\n| target | measured | met |\n|---|---|---|");
    for v in verdicts(inputs) {
        let met = match v.met {
            Some(true) => "yes",
            Some(false) => "no",
            None => "not measured",
        };
        let _ = writeln!(out, "| {} | {} | {met} |", v.target, v.measured);
    }
    out
}

/// The summary as JSON, for tools that track results over time.
pub fn json(inputs: &Inputs) -> serde_json::Value {
    let (medians, instructions) = (&inputs.medians, &inputs.instructions);
    let number = |v: f64| serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, serde_json::Value::Number);
    let groups: Vec<_> = medians
        .iter()
        .map(|(k, m)| {
            let values: serde_json::Map<_, _> = m.values.iter().map(|(n, v)| (n.clone(), number(*v))).collect();
            serde_json::json!({
                "mode": k.mode, "mix": k.mix, "generator": k.generator, "server": k.server,
                "runs": m.runs, "medians": values,
            })
        })
        .collect();
    let per_query = |counts: &BTreeMap<(String, String), f64>| -> Vec<serde_json::Value> {
        counts
            .iter()
            .map(|((server, mix), v)| serde_json::json!({"server": server, "mix": mix, "per_query": number(*v)}))
            .collect()
    };
    let ins = per_query(instructions);
    let syscalls = per_query(&inputs.syscalls);
    let targets: Vec<_> = verdicts(inputs)
        .into_iter()
        .map(|v| serde_json::json!({"target": v.target, "measured": v.measured, "met": v.met}))
        .collect();
    serde_json::json!({"groups": groups, "instructions": ins, "syscalls": syscalls, "targets": targets})
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNS: &str = "mode,round,mix,generator,server,rate,qps,answered,lost,avg_us,p50_us,p99_us,p999_us,server_cpu_us_per_query,client_cpu_us_per_query,avg_reply_bytes
peak,1,a,loadgen,echo,,200000,1,0,1,1,1,1,5.0,,
peak,1,a,loadgen,skyline,,190000,1,0,1,1,1,1,5.2,,
peak,1,a,loadgen,knot,,150000,1,0,1,1,1,1,6.8,,
peak,2,a,loadgen,skyline,,170000,1,0,1,1,1,1,5.4,,
peak,3,a,loadgen,skyline,,210000,1,0,1,1,1,1,5.3,,
paced,1,a,loadgen,skyline,150000,150000,1,0,1,1,80,1,nan,,
paced,1,a,loadgen,knot,120000,120000,1,0,1,1,100,1,nan,,
";

    #[test]
    fn medians_skip_what_is_not_a_number() {
        assert_eq!(median([3.0, f64::NAN, 1.0, 2.0]), 2.0);
        assert_eq!(median([4.0, 1.0]), 2.5);
        assert!(median([f64::NAN]).is_nan());
    }

    #[test]
    fn runs_are_grouped_and_reduced_to_medians() {
        let m = medians(&Table::parse(RUNS));
        let sky = &m[&key("peak", "a", "loadgen", "skyline")];
        assert_eq!(sky.runs, 3);
        assert_eq!(sky.get("qps"), 190_000.0);
        assert_eq!(sky.get("server_cpu_us_per_query"), 5.3);
        assert!(sky.get("rate").is_nan());
    }

    #[test]
    fn ratios_pair_the_runs_of_one_round() {
        let m = medians(&Table::parse(
            "mode,round,mix,generator,server,qps\npeak,1,a,loadgen,x,100\npeak,1,a,loadgen,y,50\npeak,2,a,loadgen,x,300\npeak,2,a,loadgen,y,100\npeak,3,a,loadgen,x,80\n",
        ));
        let s = paired(
            &m[&key("peak", "a", "loadgen", "x")],
            &m[&key("peak", "a", "loadgen", "y")],
            "qps",
        );
        assert_eq!((s.median, s.min, s.max, s.pairs), (2.5, 2.0, 3.0, 2));
        assert_eq!(s.cell(), "2.500 (2.00–3.00)");
    }

    #[test]
    fn targets_are_judged_from_per_round_ratios() {
        let inputs = Inputs {
            medians: medians(&Table::parse(RUNS)),
            instructions: per_query(
                &Table::parse("server,mix,instructions,answered\nskyline,a,900000,1000\n"),
                "instructions",
            ),
            syscalls: per_query(
                &Table::parse("server,mix,syscalls,answered\nknot,a,30,100\n"),
                "syscalls",
            ),
            allocations: Some(true),
        };
        let met: Vec<_> = verdicts(&inputs).iter().map(|v| v.met).collect();
        // 0.95 x echo, 1.267 x knot, nxdomain/srv unmeasured, CPU 1.06 x echo, 900
        // instructions, no allocations, p99 0.8 x knot at own peaks, no common-rate runs.
        let want = [
            Some(true),
            Some(true),
            None,
            None,
            Some(true),
            Some(true),
            Some(true),
            Some(true),
            None,
        ];
        assert_eq!(met, want);
        let md = markdown(&inputs);
        assert!(md.contains("| a | loadgen | skyline | 3 | 190000 | 0.950 | 1.267 |"));
        assert!(md.contains("| knot | a | 0.300 |"));
        assert_eq!(json(&inputs)["targets"].as_array().unwrap().len(), 9);
    }
}
