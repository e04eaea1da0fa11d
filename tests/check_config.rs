//! `--check-config` against a real start: for every configuration a start refuses, the check
//! refuses it too, with the same messages; what the check prints is a configuration file that
//! gives the same settings again; and no message shows Rust's debug output or type names.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long a start that should fail at once is given before it counts as serving.
const START_LIMIT: Duration = Duration::from_secs(10);

/// `skyline` with `args`, from the repository root, with no upstream and no Kubernetes
/// connection to find (an empty home, no KUBECONFIG, no in-cluster variables), and `env`.
fn skyline(args: &[&str], env: &[(&str, &str)], home: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_skyline"));
    command
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("SKYLINE_RESOLV_CONF", "none")
        .env("NO_COLOR", "1")
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env_remove("RUST_LOG");
    for (key, value) in env {
        command.env(key, value);
    }
    command
}

/// The lines of `stderr` that are skyline's own messages, not its log.
fn messages(stderr: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|line| line.starts_with("skyline: "))
        .map(str::to_owned)
        .collect()
}

/// `--check-config` with `args`: its exit code and its messages.
fn check(args: &[&str], env: &[(&str, &str)], home: &Path) -> (Option<i32>, Vec<String>, String) {
    let out = skyline(&[&["--check-config"], args].concat(), env, home)
        .output()
        .unwrap();
    (
        out.status.code(),
        messages(&out.stderr),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A start with `args` on a port of the kernel's choice: its exit code and messages, or `None`
/// for the code when it was still running after [`START_LIMIT`] (it is stopped).
fn start(args: &[&str], env: &[(&str, &str)], home: &Path) -> (Option<i32>, Vec<String>) {
    let mut child = skyline(&[&["--addr", "127.0.0.1:0"], args].concat(), env, home)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + START_LIMIT;
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let serving = child.try_wait().unwrap().is_none();
    if serving {
        child.kill().unwrap();
    }
    let Output { status, stderr, .. } = child.wait_with_output().unwrap();
    (if serving { None } else { status.code() }, messages(&stderr))
}

/// The check and the start both fail, with the same messages, one of which contains `names`.
fn both_refuse(args: &[&str], env: &[(&str, &str)], names: &str) {
    let home = tempfile::tempdir().unwrap();
    let (check_code, check_messages, stdout) = check(args, env, home.path());
    let (start_code, start_messages) = start(args, env, home.path());
    assert_eq!(
        start_code,
        Some(1),
        "a start with {args:?} fails at once: {start_messages:?}"
    );
    assert_eq!(
        check_code,
        Some(1),
        "--check-config {args:?} fails: {check_messages:?}\n{stdout}"
    );
    assert!(
        stdout.is_empty(),
        "no settings printed for a refused configuration:\n{stdout}"
    );
    assert_eq!(check_messages, start_messages, "the same messages for {args:?}");
    assert!(
        check_messages.iter().any(|m| m.contains(names)),
        "{names:?} in {check_messages:?}"
    );
}

#[test]
fn a_kubeconfig_that_does_not_exist_fails_the_check_as_it_fails_the_start() {
    both_refuse(
        &["--kubernetes", "--kubeconfig", "/nonexistent/kubeconfig.yaml"],
        &[],
        "kubernetes.kubeconfig (--kubeconfig): cannot read /nonexistent/kubeconfig.yaml",
    );
}

#[test]
fn kubernetes_without_any_kubeconfig_fails_the_check_as_it_fails_the_start() {
    both_refuse(&["--kubernetes"], &[], "no connection to an API server");
    both_refuse(
        &["--kubernetes"],
        &[("KUBECONFIG", "/nonexistent/a.yaml")],
        "KUBECONFIG: cannot read /nonexistent/a.yaml",
    );
}

#[test]
fn the_kubernetes_example_fails_without_the_kubeconfig_it_names_and_passes_with_one() {
    let example = "examples/skyline-kubernetes.toml";
    both_refuse(&["--config", example], &[], "examples/kubeconfig.yaml");
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = home.path().join("kubeconfig.yaml");
    std::fs::write(&kubeconfig, "apiVersion: v1\nkind: Config\n").unwrap();
    let (code, messages, stdout) = check(
        &["--config", example, "--kubeconfig", kubeconfig.to_str().unwrap()],
        &[],
        home.path(),
    );
    assert_eq!(code, Some(0), "{messages:?}");
    assert!(stdout.contains("\n[kubernetes]\n"), "{stdout}");
    assert!(
        stdout.contains(&format!("kubeconfig = \"{}\"", kubeconfig.display())),
        "{stdout}"
    );
}

#[test]
fn a_state_directory_that_is_a_file_fails_the_check_as_it_fails_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("state");
    std::fs::write(&file, "").unwrap();
    let file = file.to_str().unwrap();
    both_refuse(&["--state-dir", file], &[], "state_dir (--state-dir)");
    both_refuse(&["--state-dir", &format!("{file}/below")], &[], "is a file");
}

#[test]
fn a_pid_file_or_query_log_in_a_missing_directory_fails_the_check_as_it_fails_the_start() {
    both_refuse(
        &["--pid-file", "/nonexistent/skyline.pid"],
        &[],
        "pid_file (--pid-file): /nonexistent/skyline.pid: the directory /nonexistent does not exist",
    );
    both_refuse(
        &["--query-log=/nonexistent/queries.log"],
        &[],
        "observe.query_log (--query-log): /nonexistent/queries.log: the directory /nonexistent does not exist",
    );
}

#[test]
fn an_etcd_endpoint_of_another_scheme_fails_the_check_as_it_fails_the_start() {
    both_refuse(
        &["--machines", "ftp://127.0.0.1:2379"],
        &[],
        "ftp://127.0.0.1:2379 is not an etcd endpoint",
    );
    both_refuse(
        &[],
        &[("ETCD_MACHINES", "unix:///run/etcd.sock")],
        "machines (--machines, ETCD_MACHINES)",
    );
}

#[test]
fn every_configuration_file_value_of_the_wrong_type_is_listed_by_both() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("skyline.toml");
    std::fs::write(
        &file,
        "workers = \"two\"\ndrain = 5\ntimeout = \"2s\"\n[cache]\nsize = 64\n[rrl]\nrate = -1\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    both_refuse(&["--config", file], &[], "workers: \"two\" is not a whole number");
    let home = tempfile::tempdir().unwrap();
    let (_, problems, _) = check(&["--config", file], &[], home.path());
    assert_eq!(problems.len(), 5, "{problems:?}");
    for named in [
        "cache.size: 64 is not a string",
        "rrl.rate: -1 is not a whole number",
        "drain: 5 is not a string",
        "unknown key timeout: it belongs in the [forward] table",
    ] {
        assert!(problems.iter().any(|p| p.contains(named)), "{named:?} in {problems:?}");
    }
}

#[test]
fn what_the_check_prints_is_a_configuration_file_that_gives_the_same_settings() {
    let home = tempfile::tempdir().unwrap();
    let (code, messages, first) = check(
        &[
            "--config",
            "examples/skyline-full.toml",
            "--drain",
            "1500ms",
            "--cookies=false",
        ],
        &[],
        home.path(),
    );
    assert_eq!(code, Some(0), "{messages:?}");
    let dir = tempfile::tempdir().unwrap();
    let printed = dir.path().join("printed.toml");
    std::fs::write(&printed, &first).unwrap();
    let (code, messages, second) = check(&["--config", printed.to_str().unwrap()], &[], home.path());
    assert_eq!(code, Some(0), "the printed file is valid: {messages:?}\n{first}");
    let unshown = first.replace(": set, not shown", ": not set");
    assert_eq!(
        second, unshown,
        "the printed file gives the same settings, secrets aside"
    );
    assert!(first.contains("# secret: set, not shown"), "{first}");
    for line in [
        "drain = \"1500ms\"",
        "size = \"64MiB\"",
        "negative_ttl_zones = { \"cluster.local.\" = 5 }",
    ] {
        assert!(first.contains(line), "{line:?} not in:\n{first}");
    }
}

/// Debug output of Rust values, or a Rust type's name, in `message`.
fn debug_output(message: &str) -> Option<String> {
    for needle in ["Some(", "None", "enum ", "Custom {", "Os {", "kind:", "tonic::", "::"] {
        if message.contains(needle) {
            return Some(needle.to_owned());
        }
    }
    // A struct's or tuple's debug form: `Name {` or `Name(` with a capitalised name.
    let words: Vec<&str> = message.split_whitespace().collect();
    for (i, word) in words.iter().enumerate() {
        let capitalised = word.starts_with(|c: char| c.is_ascii_uppercase());
        let tuple = capitalised && word.trim_end_matches('(').contains('(') && !word.starts_with("IP");
        if tuple || (capitalised && words.get(i + 1) == Some(&"{")) {
            return Some((*word).to_owned());
        }
    }
    None
}

#[test]
fn no_error_message_shows_debug_output_or_a_type_name() {
    let dir = tempfile::tempdir().unwrap();
    let toml = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let broken_records = toml("records.json", "{\"/skydns/local/skydns/a\": ");
    let inputs: Vec<Vec<String>> = vec![
        vec!["--addr".into(), "127.0.0.1".into()],
        vec!["--addr".into(), "localhost:53".into()],
        vec!["--config".into(), toml("addr.toml", "addr = \"localhost:53\"\n")],
        vec!["--config".into(), toml("list.toml", "addr = [\"127.0.0.1\"]\n")],
        vec![
            "--config".into(),
            toml("types.toml", "workers = \"two\"\nround_robin = 1\n"),
        ],
        vec![
            "--config".into(),
            toml("unknown.toml", "domian = \"a.\"\n[forward]\nsise = 1\n"),
        ],
        vec!["--config".into(), toml("syntax.toml", "hostmaster = [\n")],
        vec![
            "--config".into(),
            toml(
                "stub.toml",
                "[forward]\nstub_zones = [{ zone = \"a.\", servers = [\"10.0.0.1\"] }]\n",
            ),
        ],
        vec!["--machines".into(), "ftp://127.0.0.1:2379".into()],
        vec!["--records".into(), "/nonexistent/records.json".into()],
        vec!["--records".into(), broken_records],
        vec![
            "--kubernetes".into(),
            "--kubeconfig".into(),
            "/nonexistent/k.yaml".into(),
        ],
        vec!["--kubernetes-pods".into(), "sometimes".into()],
        vec!["--drain".into(), "5".into()],
        vec!["--round-robin=maybe".into()],
        vec!["--cookie-secret".into(), "xyz".into()],
        vec!["--state-dir".into(), toml("state", "")],
        vec!["--domain".into(), "bad domain".into()],
    ];
    let home = tempfile::tempdir().unwrap();
    let mut seen = 0;
    for args in &inputs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = skyline(
            &[&["--check-config", "--addr", "127.0.0.1:0"], &args[..]].concat(),
            &[],
            home.path(),
        )
        .output()
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{args:?} is refused");
        assert!(!stderr.trim().is_empty(), "{args:?} says why");
        if let Some(found) = debug_output(&stderr) {
            panic!("{args:?}: {found:?} in:\n{stderr}");
        }
        seen += 1;
    }
    assert_eq!(seen, inputs.len());
}

#[test]
fn a_missing_port_and_a_host_name_are_said_as_such() {
    let home = tempfile::tempdir().unwrap();
    let out = skyline(&["--addr", "127.0.0.1"], &[], home.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("\"127.0.0.1\" has no port: write IP:port, e.g. \"127.0.0.1:53\""),
        "{stderr}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("skyline.toml");
    std::fs::write(&file, "addr = \"localhost:53\"\n").unwrap();
    let (_, problems, _) = check(&["--config", file.to_str().unwrap()], &[], home.path());
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].ends_with(
            "addr: \"localhost:53\" is not an \"IP:port\" address or a list of them (host names are not accepted)"
        ),
        "{problems:?}"
    );
}

#[test]
fn help_says_where_the_configuration_file_keys_live() {
    let home = tempfile::tempdir().unwrap();
    let out = skyline(&["--help"], &[], home.path()).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for heading in [
        "Serving and etcd (top-level keys of the --config file):",
        "Forwarding ([forward] table):",
        "Response cache ([cache] table):",
        "Kubernetes cluster DNS ([kubernetes] table):",
        "Observation ([observe] table):",
        "DNS Cookies ([cookies] table):",
        "Response rate limiting ([rrl] table):",
    ] {
        assert!(help.contains(heading), "{heading:?} not in:\n{help}");
    }
    let prefetch = help.split("--no-prefetch").nth(1).expect("--no-prefetch is listed");
    let prefetch = prefetch.split("\n\n").next().unwrap();
    assert!(!prefetch.contains("default: true"), "{prefetch}");
}

#[test]
fn an_unreachable_etcd_is_logged_in_words_not_as_the_client_s_debug_dump() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let endpoint = format!("http://{closed}");
    let mut child = skyline(&["--addr", "127.0.0.1:0", "--machines", &endpoint], &[], home.path())
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let deadline = Instant::now() + START_LIMIT;
    let mut failure = None;
    while failure.is_none() && Instant::now() < deadline {
        if let Ok(line) = received.recv_timeout(Duration::from_millis(100)) {
            failure = line
                .contains("etcd")
                .then(|| line.split_once(" error=").map(|(_, e)| e.to_owned()))
                .flatten();
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let error = failure.expect("the start logs why etcd cannot be reached");
    assert!(error.to_lowercase().contains("refused"), "{error}");
    if let Some(found) = debug_output(&error) {
        panic!("{found:?} in the logged error: {error}");
    }
}

#[test]
fn a_bad_value_from_the_environment_names_its_variable() {
    let home = tempfile::tempdir().unwrap();
    let out = skyline(&["--check-config"], &[("SKYDNS_ADDR", "127.0.0.1")], home.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("'127.0.0.1'"), "{stderr}");
    assert!(stderr.contains("has no port"), "{stderr}");
    assert!(
        stderr.contains("given by the environment variable SKYDNS_ADDR"),
        "{stderr}"
    );
    let typed = skyline(
        &["--check-config", "--addr", "127.0.0.1"],
        &[("SKYDNS_ADDR", "127.0.0.1:53")],
        home.path(),
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&typed.stderr);
    assert!(!stderr.contains("environment variable"), "the flag gave it: {stderr}");
}

#[test]
fn a_hosts_file_with_a_bad_line_fails_the_check_as_it_fails_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hosts");
    std::fs::write(&path, "127.0.0.1 localhost\n10.0.0.300 node-a\n").unwrap();
    let path = path.to_str().unwrap();
    both_refuse(
        &["--hosts", path],
        &[],
        &format!("hosts.file {path}: line 2: \"10.0.0.300\" is not an IPv4 or IPv6 address"),
    );
    both_refuse(
        &["--hosts", "/nonexistent/hosts"],
        &[],
        "hosts.file /nonexistent/hosts: cannot read it",
    );
}
