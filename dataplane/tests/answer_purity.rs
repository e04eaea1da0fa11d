//! The answer path has no hidden state (ARCHITECTURE.md, "Rules"): no source file that
//! `answer` or `answer_recursive` reaches keeps state per thread or reads a clock. The time, the
//! cookie secrets and the records signed per query name come in the `Context` and the
//! `Recursion`, from the worker that owns them, so that an answer is a function of its inputs.
//! The sources are read as text: a clock read or a `thread_local!` added anywhere below the
//! answer path fails here, with its file and line.

use std::fs;
use std::path::{Path, PathBuf};

/// What the answer path may not hold, and why.
const FORBIDDEN: &[(&str, &str)] = &[
    (
        "thread_local!",
        "state kept per thread: what answering keeps between queries is the caller's",
    ),
    ("Instant::now", "a monotonic clock read: the caller passes the time"),
    ("SystemTime::now", "a wall clock read: the caller passes `Context::now`"),
    ("time::now", "a clock read through a time library"),
    ("Utc::now", "a clock read through chrono"),
    ("Local::now", "a clock read through chrono"),
    (".elapsed()", "a clock read measuring a duration: the caller measures"),
    ("clock_gettime", "a clock read through libc"),
    ("gettimeofday", "a clock read through libc"),
    ("libc::time(", "a clock read through libc"),
];

/// The sources under `dataplane/src/` that answering reaches, each with why. A folder stands
/// for every `.rs` file below it, test files aside.
const ANSWER_PATH: &[(&str, &str)] = &[
    ("answer", "`answer`, the message builder and the signed answers"),
    ("reply.rs", "the transport, the reply size limit and the reply's facts"),
    (
        "rewrite",
        "the plugins run ahead of answering: rewrite, template, whoami, chaos",
    ),
    ("wire", "parsing every query and writing every reply"),
    (
        "cookie.rs",
        "the server cookie checked and made for a query with a COOKIE option",
    ),
    (
        "sys/peer.rs",
        "the client's address, read from the socket's form for views and cookies",
    ),
    (
        "snapshot/mod.rs",
        "`Snapshot::find` and the zones, nodes and echoed addresses it names",
    ),
    ("snapshot/nodes.rs", "the node table `find` looks names up in"),
    ("snapshot/rrset.rs", "the compiled answers copied into replies"),
    ("snapshot/views.rs", "the answer of a SkyDNS name for the client's view"),
    (
        "snapshot/written.rs",
        "the records the tables write on the stack per query",
    ),
    ("snapshot/kubernetes/hosts.rs", "the cluster names answered from tables"),
    (
        "snapshot/kubernetes/autopath.rs",
        "the pods and search domains of a search-list (autopath) answer",
    ),
    (
        "snapshot/kubernetes/names.rs",
        "the reverse names and port-name spellings of those tables",
    ),
    ("snapshot/kubernetes/sets.rs", "the RRsets those tables answer with"),
    ("snapshot/skydns/leaves.rs", "the SkyDNS leaves answered without a node"),
    (
        "snapshot/skydns/wildcard.rs",
        "SkyDNS query wildcards, answered per query",
    ),
    ("snapshot/skydns/answers.rs", "the answer sets a query wildcard builds"),
    (
        "snapshot/skydns/address.rs",
        "the addresses a query wildcard's hosts resolve to",
    ),
    ("snapshot/skydns/section.rs", "the RRsets of those answer sets"),
    (
        "snapshot/skydns/select.rs",
        "the services a query wildcard selects for the client",
    ),
    ("snapshot/skydns/group.rs", "SkyDNS groups, which narrow that selection"),
    ("snapshot/skydns/srv.rs", "the SRV records of a query wildcard"),
    ("snapshot/skydns/index.rs", "the SkyDNS index a query wildcard walks"),
    ("snapshot/skydns/entry.rs", "the SkyDNS records that index holds"),
    (
        "snapshot/skydns/key.rs",
        "the SkyDNS key paths that index is ordered by",
    ),
    (
        "snapshot/skydns/service.rs",
        "the SkyDNS values and views those records carry",
    ),
    (
        "dnssec/denial.rs",
        "the records signed per query name, their cache and budget",
    ),
    ("snapshot/signed.rs", "the signed answers and denials copied"),
    (
        "dnssec/rrsets.rs",
        "the records copied into signed replies, and a query wildcard's signed",
    ),
    (
        "dnssec/mod.rs",
        "the signing settings a denial is signed and cached with",
    ),
    ("dnssec/nsec3.rs", "the NSEC3 hash of a name denied"),
    (
        "dnssec/rrsig.rs",
        "the signatures made per query name and their validity",
    ),
    (
        "dnssec/records.rs",
        "a query wildcard's reply read back as RRsets to sign",
    ),
    ("dnssec/key.rs", "the key those signatures are made with"),
    (
        "forward/recursive.rs",
        "`answer_recursive`: names outside the zones, from the cache",
    ),
    ("forward/route.rs", "the route of a name outside the zones"),
    (
        "cache/entry.rs",
        "cache entries written into replies, their TTLs counted down",
    ),
    (
        "cache/rdata.rs",
        "the record data of those entries, rewritten as they are copied",
    ),
    (
        "cache/mod.rs",
        "the cache lookups `answer_recursive` makes at `Recursion::now`",
    ),
];

/// Lines the scan allows in a file of the answer path, each with why it is not answering.
const ALLOWED: &[(&str, &str, &str)] = &[(
    "cache/mod.rs",
    "clock: Clock::new(Instant::now()),",
    "the epoch of a cache's compact times, read once when a worker makes its cache",
)];

/// Every forbidden read in `source` (the text of `file`), as `file:line: code (why)`: test
/// modules, comments and the lines [`ALLOWED`] are not read.
fn violations(file: &str, source: &str) -> Vec<String> {
    let code = match source.find("#[cfg(test)]\nmod tests") {
        Some(tests) => &source[..tests],
        None => source,
    };
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let line = line.trim();
        if line.starts_with("//") || ALLOWED.iter().any(|&(f, allowed, _)| f == file && line == allowed) {
            continue;
        }
        for (pattern, why) in FORBIDDEN {
            if line.contains(pattern) {
                found.push(format!("{file}:{}: {line} ({why})", n + 1));
            }
        }
    }
    found
}

/// The `.rs` files below `dir`, test files and folders aside.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_str().unwrap();
        if path.is_dir() {
            if name != "tests" {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.starts_with("test_") {
            out.push(path);
        }
    }
}

#[test]
fn nothing_the_answer_path_reaches_reads_a_clock_or_keeps_state_per_thread() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    let mut files = 0;
    for (entry, why) in ANSWER_PATH {
        let path = src.join(entry);
        assert!(path.exists(), "{entry} ({why}) is gone: update the list");
        let mut paths = Vec::new();
        if path.is_dir() {
            sources(&path, &mut paths);
        } else {
            paths.push(path);
        }
        for path in paths {
            let file = path.strip_prefix(&src).unwrap().to_str().unwrap().to_string();
            found.extend(violations(&file, &fs::read_to_string(&path).unwrap()));
            files += 1;
        }
    }
    assert!(files > ANSWER_PATH.len(), "the folders were read");
    assert!(
        found.is_empty(),
        "the answer path must take these from its caller:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_finds_each_forbidden_read_outside_tests_and_comments() {
    for (pattern, _) in FORBIDDEN {
        let source = format!("fn f() {{\n    let x = {pattern};\n}}\n");
        assert_eq!(violations("answer/x.rs", &source).len(), 1, "{pattern}");
        let commented = format!("// {pattern}\nfn f() {{}}\n#[cfg(test)]\nmod tests {{\n    {pattern}\n}}\n");
        assert!(violations("answer/x.rs", &commented).is_empty(), "{pattern}");
    }
    let (file, line, _) = ALLOWED[0];
    assert!(violations(file, line).is_empty());
    assert_eq!(
        violations("answer/mod.rs", line).len(),
        1,
        "allowed in its own file only"
    );
}
