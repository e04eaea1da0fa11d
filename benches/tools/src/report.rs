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

/// Per group of runs: how many, and the median of each metric.
#[derive(Debug, Clone, Default)]
pub struct Medians {
    /// Runs in the group.
    pub runs: usize,
    /// Metric name → median.
    pub values: BTreeMap<String, f64>,
}

impl Medians {
    /// The median of `metric`; NaN when unknown.
    pub fn get(&self, metric: &str) -> f64 {
        self.values.get(metric).copied().unwrap_or(f64::NAN)
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
            (key, Medians { runs, values })
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
    let get = |mode: &str, mix: &str, server: &str, metric: &str| {
        medians
            .get(&key(mode, mix, "loadgen", server))
            .map_or(f64::NAN, |m| m.get(metric))
    };
    let judged = |value: f64, ok: bool| if value.is_nan() { None } else { Some(ok) };
    let mut out = Vec::new();

    let of_ceiling = ratio(get("peak", "a", SUBJECT, "qps"), get("peak", "a", CEILING, "qps"));
    out.push(Verdict {
        target: "A mix, own load generator: QPS >= 0.95 x echo ceiling".into(),
        measured: format!("{of_ceiling:.3} x echo"),
        met: judged(of_ceiling, of_ceiling >= 0.95),
    });
    for (mix, want) in [("a", 1.15), ("nxdomain", 1.1), ("srv", 1.1)] {
        let r = ratio(get("peak", mix, SUBJECT, "qps"), get("peak", mix, PEER, "qps"));
        out.push(Verdict {
            target: format!("{mix} mix, own load generator: QPS >= {want} x knot"),
            measured: format!("{r:.3} x knot"),
            met: judged(r, r >= want),
        });
    }
    let cpu = ratio(
        get("peak", "a", SUBJECT, "server_cpu_us_per_query"),
        get("peak", "a", CEILING, "server_cpu_us_per_query"),
    );
    out.push(Verdict {
        target: "A mix: server CPU per answered query <= 1.07 x echo's".into(),
        measured: format!("{cpu:.3} x echo"),
        met: judged(cpu, cpu <= 1.07),
    });
    let ins = instructions
        .get(&(SUBJECT.to_string(), "a".to_string()))
        .copied()
        .unwrap_or(f64::NAN);
    out.push(Verdict {
        target: "A mix: <= 1,000 user-space instructions per answered query (callgrind)".into(),
        measured: format!("{ins:.0} instructions per query"),
        met: judged(ins, ins <= 1000.0),
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
        let p99 = ratio(get(mode, "a", SUBJECT, "p99_us"), get(mode, "a", PEER, "p99_us"));
        out.push(Verdict {
            target: format!("A mix at {load}: p99 latency <= knot's"),
            measured: format!("{p99:.3} x knot's p99"),
            met: judged(p99, p99 <= 1.0),
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
        "### Peak load (medians)\n\n| mix | generator | server | runs | QPS | x echo | skyline/knot | avg µs | p99 µs | lost | server CPU µs/query | CPU x echo | client CPU µs/query |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for (k, m) in medians.iter().filter(|(k, _)| k.mode == "peak") {
        let echo = peer_of(k, CEILING);
        let of_echo = echo.map_or(f64::NAN, |e| ratio(m.get("qps"), e.get("qps")));
        let cpu_of_echo = echo.map_or(f64::NAN, |e| {
            ratio(m.get("server_cpu_us_per_query"), e.get("server_cpu_us_per_query"))
        });
        let vs_peer = if k.server == SUBJECT {
            peer_of(k, PEER).map_or(f64::NAN, |p| ratio(m.get("qps"), p.get("qps")))
        } else {
            f64::NAN
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            k.mix,
            k.generator,
            k.server,
            m.runs,
            cell(m.get("qps"), 0),
            cell(of_echo, 3),
            cell(vs_peer, 3),
            cell(m.get("avg_us"), 1),
            cell(m.get("p99_us"), 1),
            cell(m.get("lost"), 0),
            cell(m.get("server_cpu_us_per_query"), 3),
            cell(cpu_of_echo, 3),
            cell(m.get("client_cpu_us_per_query"), 3),
        );
    }
    let _ = writeln!(
        out,
        "\n### Paced load (medians)\n\n`paced`: each server at 80 % of its own median peak; `paced-common`: every server at 80 % of knot's.\n\n| load | mix | server | runs | offered QPS | answered QPS | avg µs | p50 µs | p99 µs | p99.9 µs | server CPU µs/query | p99 skyline/knot |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for (k, m) in medians.iter().filter(|(k, _)| k.mode.starts_with("paced")) {
        let vs_peer = if k.server == SUBJECT {
            peer_of(k, PEER).map_or(f64::NAN, |p| ratio(m.get("p99_us"), p.get("p99_us")))
        } else {
            f64::NAN
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
            cell(vs_peer, 3),
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
    fn targets_are_judged_from_ratios_of_medians() {
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
