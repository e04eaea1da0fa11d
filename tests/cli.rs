//! End-to-end: SkyDNS's flags and environment variables, the TOML config file, and their
//! precedence (flags > env > file > /skydns/config > defaults), observed through DNS answers.

mod common;

use common::Skyline;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use std::process::Command;

const RECORDS: &str = r#"{
  "/skydns/local/skydns/web": {"host": "10.9.0.1"},
  "/skydns/test/env/web": {"host": "10.9.0.2"},
  "/skydns/test/flag/web": {"host": "10.9.0.3"},
  "/skydns/test/file/web": {"host": "10.9.0.4"},
  "/custom/local/skydns/web": {"host": "10.9.0.5"}
}"#;

fn answer_of(s: &Skyline, name: &str) -> Option<String> {
    let reply = s.udp(name, RecordType::A);
    (reply.response_code() == ResponseCode::NoError)
        .then(|| reply.answers().first().map(|r| r.data().unwrap().to_string()))
        .flatten()
}

#[test]
fn default_domain_is_skydns_local() {
    let s = Skyline::start(RECORDS, &[], &[]);
    assert_eq!(answer_of(&s, "web.skydns.local.").as_deref(), Some("10.9.0.1"));
}

#[test]
fn skydns_domain_environment_variable_sets_the_domain() {
    let s = Skyline::start(RECORDS, &[], &[("SKYDNS_DOMAIN", "env.test.")]);
    assert_eq!(answer_of(&s, "web.env.test.").as_deref(), Some("10.9.0.2"));
    assert_eq!(
        s.udp("web.skydns.local.", RecordType::A).response_code(),
        ResponseCode::Refused
    );
}

#[test]
fn a_flag_beats_the_environment() {
    let s = Skyline::start(RECORDS, &["--domain", "flag.test."], &[("SKYDNS_DOMAIN", "env.test.")]);
    assert_eq!(answer_of(&s, "web.flag.test.").as_deref(), Some("10.9.0.3"));
}

#[test]
fn the_environment_beats_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("skyline.toml");
    std::fs::write(&toml, "domain = \"file.test.\"\n").unwrap();
    let file_only = Skyline::start(RECORDS, &["--config", toml.to_str().unwrap()], &[]);
    assert_eq!(answer_of(&file_only, "web.file.test.").as_deref(), Some("10.9.0.4"));
    let both = Skyline::start(
        RECORDS,
        &["--config", toml.to_str().unwrap()],
        &[("SKYDNS_DOMAIN", "env.test.")],
    );
    assert_eq!(answer_of(&both, "web.env.test.").as_deref(), Some("10.9.0.2"));
}

#[test]
fn path_prefix_comes_from_its_environment_variable() {
    let s = Skyline::start(RECORDS, &[], &[("SKYDNS_PATH_PREFIX", "custom")]);
    assert_eq!(answer_of(&s, "web.skydns.local.").as_deref(), Some("10.9.0.5"));
}

#[test]
fn unknown_config_file_keys_are_rejected_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("skyline.toml");
    std::fs::write(&toml, "domian = \"typo.test.\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_skyline"))
        .arg("--config")
        .arg(&toml)
        .arg("--addr")
        .arg("127.0.0.1:0")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("domian"),
        "the error names the bad key"
    );
}

#[test]
fn an_invalid_address_is_rejected_at_start() {
    let out = Command::new(env!("CARGO_BIN_EXE_skyline"))
        .args(["--addr", "localhost:53"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn a_missing_records_file_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_skyline"))
        .args(["--addr", "127.0.0.1:0", "--records", "/nonexistent/records.json"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/records.json"));
}

/// Runs `skyline --check-config` with `args`, from the repository root; its exit code, stdout
/// and stderr.
fn check_config(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_skyline"))
        .arg("--check-config")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("SKYLINE_RESOLV_CONF", "none")
        .output()
        .unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn check_config_prints_the_settings_in_force_and_exits_zero() {
    let (code, stdout, stderr) = check_config(&["--config", "examples/skyline-full.toml", "--drain", "2s"]);
    assert_eq!(code, Some(0), "{stderr}");
    for line in [
        "addr = [\"127.0.0.1:1053\"]",
        "domain = \"skydns.local.\"",
        "# source: the records file ",
        "drain = \"2s\"",
        "tcp_max_per_client = 0",
        "http_addr = [\"127.0.0.1:9153\"]",
        "\n[forward]\n",
        "timeout = \"1500ms\"",
        "# state_dir: not set",
        "\n[cookies]\nenabled = true\n# secret: set, not shown\n# secret_previous: set, not shown\n",
        "\n[rrl]\nrate = 0\n",
    ] {
        assert!(stdout.contains(line), "{line:?} not in:\n{stdout}");
    }
    assert!(
        !stdout.contains("e5e973e5a6b2a43f48e7dc849e37bfcf"),
        "a cookie secret is never printed:\n{stdout}"
    );
}

#[test]
fn check_config_prints_and_checks_cookie_and_rate_limiting_settings() {
    let (code, stdout, stderr) = check_config(&[
        "--config",
        "examples/skyline-full.toml",
        "--rrl-rate",
        "5",
        "--rrl-exempt",
        "10.0.0.0/8",
        "--cookies=false",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    for line in [
        "\n[cookies]\nenabled = false\n",
        "\n[rrl]\nrate = 5\nslip = 2\nwindow = 15\nipv4_prefix = 24\nipv6_prefix = 56\nexempt = [\"10.0.0.0/8\"]\n",
    ] {
        assert!(stdout.contains(line), "{line:?} not in:\n{stdout}");
    }
    let (code, _, stderr) = check_config(&[
        "--config",
        "examples/skyline-full.toml",
        "--cookie-secret",
        "xyz",
        "--rrl-window",
        "0",
    ]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("cookies.secret"), "{stderr}");
    assert!(stderr.contains("rrl.window"), "{stderr}");
}

#[test]
fn check_config_names_every_problem_and_exits_one() {
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("records.json");
    std::fs::write(&records, r#"{"/skydns/local/skydns/bad": {"host": "10.0.0.300"}}"#).unwrap();
    let records = records.to_str().unwrap();
    let (code, stdout, stderr) = check_config(&["--records", records, "--tcp-max-connections", "0", "--no-rec"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.is_empty(),
        "no settings printed for a rejected configuration:\n{stdout}"
    );
    assert!(stderr.contains("tcp_max_connections"), "{stderr}");
    assert!(stderr.contains("1 of 1 records are not valid"), "{stderr}");
    // A start serves beside records it skips: the check warns of them and passes.
    let (code, stdout, stderr) = check_config(&["--records", records, "--no-rec"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("warning") && stderr.contains("1 of 1 records are not valid"),
        "{stderr}"
    );
    assert!(stdout.contains("records = "), "{stdout}");
    let (code, _, stderr) = check_config(&["--records", "/nonexistent/records.json"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("/nonexistent/records.json"), "{stderr}");
}
