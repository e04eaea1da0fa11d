//! End-to-end tests of running under systemd, with this test in systemd's place: it binds the
//! UDP socket and TCP listener, passes them to the real binary as socket activation does
//! (descriptors 3 and up, `LISTEN_FDS`, `LISTEN_PID` naming the skyline process), and listens on
//! the `NOTIFY_SOCKET` datagram socket for skyline's notifications. DNS is asked with
//! hickory-proto. The descriptors are moved into place by bash (`exec 3<&N`), which then
//! `exec`s skyline, so that `$$` is skyline's process ID.
//!
//! Then the unit files of `deploy/systemd/`: `systemd-analyze verify` has nothing to say about
//! them; the service grants `CAP_NET_BIND_SERVICE` alone, and under its user, capability sets
//! and `NoNewPrivileges` (made by `setpriv`, as systemd makes them) skyline binds a port below
//! 1024, also as a binary carrying that file capability; reload and upgrade signal the main
//! process alone; the unit makes the directories of the paths the examples show; its command
//! line with `examples/skyline.toml` passes `--check-config`. `systemd-analyze` (systemd),
//! `setpriv` (util-linux), `setcap` (libcap2-bin) and root are needed; under CI=true their
//! absence fails the tests that use them, elsewhere they skip.

mod common;

use common::{a_of, query, tcp_query, udp_query};
use hickory_proto::rr::RecordType;
use skyline_dataplane::sys::{send_signal, Signal};
use socket2::SockRef;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RECORDS: &str = r#"{"/skydns/local/skydns/web": {"host": "10.0.0.1"}}"#;

/// A UDP socket and a TCP listener on one free port of 127.0.0.1, inheritable by a child.
fn sockets() -> (UdpSocket, TcpListener) {
    loop {
        let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        if let Ok(tcp) = TcpListener::bind(udp.local_addr().unwrap()) {
            SockRef::from(&udp).set_cloexec(false).unwrap();
            SockRef::from(&tcp).set_cloexec(false).unwrap();
            return (udp, tcp);
        }
    }
}

/// skyline started as systemd starts a socket-activated `Type=notify` service: `fds` become
/// descriptors 3, 4, ... in that order.
struct Activated {
    child: Child,
    notify: UnixDatagram,
    _dir: tempfile::TempDir,
}

impl Activated {
    fn start(fds: &[i32], extra: &[&str]) -> Activated {
        let dir = tempfile::tempdir().unwrap();
        let records = dir.path().join("records.json");
        std::fs::write(&records, RECORDS).unwrap();
        let notify_path = dir.path().join("notify");
        let notify = UnixDatagram::bind(&notify_path).unwrap();
        notify.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // Each descriptor goes aside first (100 + i), so that one already at 3 or 4 is not
        // overwritten before it is moved; the originals and the copies aside are then closed.
        assert!(fds.iter().all(|&fd| fd < 100), "descriptors below the ones set aside");
        let aside: Vec<String> = fds
            .iter()
            .enumerate()
            .map(|(i, fd)| format!("{}<&{fd}", 100 + i))
            .collect();
        let close_originals: Vec<String> = fds
            .iter()
            .filter(|&&fd| fd >= 3 + fds.len() as i32)
            .map(|fd| format!("{fd}<&-"))
            .collect();
        let into_place: Vec<String> = (0..fds.len())
            .map(|i| format!("{}<&{} {}<&-", i + 3, 100 + i, 100 + i))
            .collect();
        let script = format!(
            "exec {} {}; exec {}; LISTEN_PID=$$ LISTEN_FDS={} exec \"$0\" \"$@\"",
            aside.join(" "),
            close_originals.join(" "),
            into_place.join(" "),
            fds.len()
        );
        let child = Command::new("bash")
            .arg("-c")
            .arg(script)
            .arg(env!("CARGO_BIN_EXE_skyline"))
            .args(["--systemd", "--records"])
            .arg(&records)
            .args(["--workers", "2", "--no-pin", "--no-rec", "--drain", "0s"])
            .args(extra)
            .env("NOTIFY_SOCKET", &notify_path)
            .env("SKYLINE_RESOLV_CONF", "none")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Activated {
            child,
            notify,
            _dir: dir,
        }
    }

    /// The next notification, as sent.
    fn notification(&self) -> String {
        let mut buf = [0u8; 512];
        let n = self.notify.recv(&mut buf).expect("a notification from skyline");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    fn signal(&self, signal: Signal) {
        send_signal(self.child.id(), signal).unwrap();
    }

    fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for Activated {
    fn drop(&mut self) {
        common::stop_child(&mut self.child, "skyline");
    }
}

fn answers_web(addr: SocketAddr) {
    let q = query("web.skydns.local.", RecordType::A, Some(1232));
    for reply in [udp_query(addr, &q), tcp_query(addr, &q)] {
        assert_eq!(a_of(&reply), [Ipv4Addr::new(10, 0, 0, 1)]);
    }
}

#[test]
fn passed_sockets_are_served_and_ready_reloading_stopping_are_notified() {
    let (udp, tcp) = sockets();
    let addr = udp.local_addr().unwrap();
    let mut s = Activated::start(&[udp.as_raw_fd(), tcp.as_raw_fd()], &[]);
    let ready = s.notification();
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");
    // systemd keeps its own copies open; the test's are not needed to serve.
    drop((udp, tcp));
    answers_web(addr);
    s.signal(Signal::Hangup);
    let reloading = s.notification();
    assert!(reloading.lines().any(|l| l == "RELOADING=1"), "{reloading:?}");
    assert!(
        reloading.lines().any(|l| l.starts_with("MONOTONIC_USEC=")),
        "{reloading:?}"
    );
    assert!(
        s.notification().lines().any(|l| l == "READY=1"),
        "ready again after the reload"
    );
    answers_web(addr);
    s.signal(Signal::Terminate);
    assert!(s.notification().lines().any(|l| l == "STOPPING=1"));
    let status = s.wait_exit(Duration::from_secs(5)).expect("exits");
    assert!(status.success(), "{status:?}");
}

#[test]
fn sockets_passed_in_another_order_are_paired_by_address() {
    let (udp, tcp) = sockets();
    let addr = udp.local_addr().unwrap();
    let s = Activated::start(&[tcp.as_raw_fd(), udp.as_raw_fd()], &[]);
    assert!(s.notification().lines().any(|l| l == "READY=1"));
    answers_web(addr);
}

#[test]
fn a_udp_socket_without_its_tcp_listener_is_a_clear_error() {
    let (udp, _tcp) = sockets();
    let mut s = Activated::start(&[udp.as_raw_fd()], &[]);
    let status = s.wait_exit(Duration::from_secs(10)).expect("exits at start");
    assert!(!status.success());
}

/// `deploy/systemd/`, where the unit files are.
fn units_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/systemd")
}

/// Every `Key=value` of section `[section]` of the unit file `name`, in order; comments and
/// blank lines left out.
fn unit_values(name: &str, section: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(units_dir().join(name)).unwrap();
    let mut current = String::new();
    let mut values = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = name.to_owned();
        } else if current == section {
            let (key, value) = line
                .split_once('=')
                .unwrap_or_else(|| panic!("{name}: {line:?} is not Key=value"));
            values.push((key.trim().to_owned(), value.trim().to_owned()));
        }
    }
    assert!(!values.is_empty(), "{name}: no [{section}] section");
    values
}

/// The value of the last `key=` in `[Service]` of skyline.service, as systemd reads it.
fn service(key: &str) -> Option<String> {
    unit_values("skyline.service", "Service")
        .into_iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

fn service_words(key: &str) -> Vec<String> {
    service(key)
        .unwrap_or_else(|| panic!("skyline.service sets no {key}="))
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Whether this process runs as root; under CI=true not being root fails the test that needs it.
fn root(what: &str) -> bool {
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    });
    if !root {
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true"),
            "{what} needs root under CI=true"
        );
        eprintln!("skipping: {what} needs root");
    }
    root
}

#[test]
fn systemd_analyze_verify_finds_nothing_to_say_about_the_units() {
    if !common::tool("systemd-analyze", "systemd") {
        return;
    }
    // verify checks that ExecStart= names an executable: this build's binary stands in for
    // /usr/local/bin/skyline; the rest of the files is as shipped.
    let dir = tempfile::tempdir().unwrap();
    let mut installed = 0;
    for entry in std::fs::read_dir(units_dir()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if !(name.ends_with(".service") || name.ends_with(".socket")) {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("/usr/local/bin/skyline", env!("CARGO_BIN_EXE_skyline"));
        std::fs::write(dir.path().join(&name), text).unwrap();
        installed += 1;
    }
    assert_eq!(installed, 2, "skyline.service and skyline.socket");
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(dir.path().join("skyline.service"))
        .arg(dir.path().join("skyline.socket"))
        .output()
        .unwrap();
    // An unknown key or a bad value is a warning on stderr with exit status 0: both must be
    // clean.
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
}

#[test]
fn the_unit_grants_cap_net_bind_service_and_nothing_else() {
    for key in ["CapabilityBoundingSet", "AmbientCapabilities"] {
        assert_eq!(service_words(key), ["CAP_NET_BIND_SERVICE"], "skyline.service {key}=");
    }
    assert_eq!(service("NoNewPrivileges").as_deref(), Some("true"));
    // The container image's binary carries the file capability, and a binary so marked needs
    // it in the bounding set to be executed at all.
    let dockerfile =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile")).unwrap();
    assert!(dockerfile.contains("setcap cap_net_bind_service=+ep"));
}

/// The `setpriv` arguments that give a process what skyline.service gives skyline: an
/// unprivileged user (DynamicUser=), the bounding and ambient sets, no new privileges.
fn as_the_unit_runs_it() -> Vec<String> {
    let caps = |key| {
        service_words(key)
            .iter()
            .map(|c| format!(",+{}", c.trim_start_matches("CAP_").to_ascii_lowercase()))
            .collect::<String>()
    };
    let ambient = caps("AmbientCapabilities");
    let mut args = vec![
        "--reuid=61184".to_owned(),
        "--regid=61184".to_owned(),
        "--clear-groups".to_owned(),
        format!("--bounding-set=-all{}", caps("CapabilityBoundingSet")),
        format!("--inh-caps=-all{ambient}"),
        format!("--ambient-caps=-all{ambient}"),
    ];
    if service("NoNewPrivileges").as_deref() == Some("true") {
        args.push("--no-new-privs".to_owned());
    }
    args
}

/// A port below 1024 on 127.0.0.1, free for UDP and TCP now.
fn privileged_port() -> u16 {
    (900..1024)
        .rev()
        .find(|&port| {
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            UdpSocket::bind(addr).is_ok() && TcpListener::bind(addr).is_ok()
        })
        .expect("no free port below 1024 on 127.0.0.1")
}

/// Under the unit's user, capability sets and NoNewPrivileges (set up by `setpriv` as systemd
/// sets them up), skyline binds a port below 1024 and answers there, both as built and as a
/// binary carrying the file capability `cap_net_bind_service` (the container image's, or one
/// installed with `setcap`), which an empty bounding set would keep from being executed.
#[test]
fn under_the_units_capabilities_skyline_binds_a_privileged_port_with_or_without_a_file_capability() {
    if !root("running skyline as another user")
        || !common::tool("setpriv", "util-linux")
        || !common::tool("setcap", "libcap2-bin")
    {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let records = dir.path().join("records.json");
    std::fs::write(&records, RECORDS).unwrap();
    let plain = dir.path().join("skyline");
    std::fs::copy(env!("CARGO_BIN_EXE_skyline"), &plain).unwrap();
    let marked = dir.path().join("skyline-setcap");
    std::fs::copy(env!("CARGO_BIN_EXE_skyline"), &marked).unwrap();
    let setcap = Command::new("setcap")
        .arg("cap_net_bind_service=+ep")
        .arg(&marked)
        .output()
        .unwrap();
    assert!(setcap.status.success(), "{}", String::from_utf8_lossy(&setcap.stderr));
    for binary in [&plain, &marked] {
        let port = privileged_port();
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let mut child = Command::new("setpriv")
            .args(as_the_unit_runs_it())
            .arg("--")
            .arg(binary)
            .args(["--addr", &addr.to_string(), "--records"])
            .arg(&records)
            .args(["--workers", "1", "--no-pin", "--no-rec", "--drain", "0s"])
            .env("SKYLINE_RESOLV_CONF", "none")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let serving = loop {
            if let Some(status) = child.try_wait().unwrap() {
                let mut stderr = String::new();
                std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
                panic!("{}: exited with {status}:\n{stderr}", binary.display());
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                break true;
            }
            if Instant::now() > deadline {
                break false;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let answered = serving && {
            let q = query("web.skydns.local.", RecordType::A, Some(1232));
            a_of(&udp_query(addr, &q)) == [Ipv4Addr::new(10, 0, 0, 1)]
        };
        common::stop_child(&mut child, "skyline");
        assert!(serving, "{}: not serving on {addr} within 10 s", binary.display());
        assert!(answered, "{}: no answer on {addr}", binary.display());
    }
}

/// SIGHUP and SIGUSR2 go to the serving process alone: while an upgrade runs the unit holds two
/// skyline processes, and the new one dies of either signal until it has set up its handlers.
/// A stop, though, reaches both.
#[test]
fn reload_and_upgrade_signal_the_main_process_alone() {
    assert_eq!(service_words("ExecReload"), ["/bin/kill", "-HUP", "$MAINPID"]);
    assert_eq!(service("KillMode").as_deref(), Some("control-group"));
    assert_eq!(
        service("NotifyAccess").as_deref(),
        Some("all"),
        "the new process notifies before it is the main one"
    );
    let text = std::fs::read_to_string(units_dir().join("skyline.service")).unwrap();
    let upgrade: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with('#') && l.contains("systemctl kill") && l.contains("SIGUSR2"))
        .collect();
    assert_eq!(
        upgrade.len(),
        1,
        "skyline.service should say how to upgrade: {upgrade:?}"
    );
    let words: Vec<&str> = upgrade[0].trim_start_matches('#').split_whitespace().collect();
    assert!(words.contains(&"--kill-whom=main"), "{words:?}");
    assert!(words.contains(&"skyline.service"), "{words:?}");
    let deploy_doc =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/deploy.md")).unwrap();
    assert!(
        deploy_doc.contains(&format!("`{}`", words.join(" "))),
        "docs/deploy.md should give the unit's upgrade command, {words:?}"
    );
}

/// Every absolute path that skyline writes or connects to in the examples (`state_dir`,
/// `pid_file`, `query_log`, `dnstap`, shown or commented out) lies in a directory the unit makes
/// for it, since ProtectSystem=strict leaves everything else read-only.
#[test]
fn the_unit_makes_the_directories_of_the_paths_the_examples_use() {
    let state = service_words("StateDirectory");
    let runtime = service_words("RuntimeDirectory");
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut paths = 0;
    for entry in std::fs::read_dir(&examples).unwrap() {
        let file = entry.unwrap().path();
        if file.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        for line in std::fs::read_to_string(&file).unwrap().lines() {
            let line = line.trim_start_matches(['#', ' ']);
            let Some((key, value)) = line.split_once(" = ") else {
                continue;
            };
            if !["state_dir", "pid_file", "query_log", "dnstap"].contains(&key) {
                continue;
            }
            let path = value.trim_matches('"');
            if !path.starts_with('/') {
                continue;
            }
            let inside = |root: &str, dirs: &[String]| {
                dirs.iter()
                    .any(|d| path == format!("{root}/{d}") || path.starts_with(&format!("{root}/{d}/")))
            };
            assert!(
                inside("/var/lib", &state) || inside("/run", &runtime),
                "{}: {key} = {path:?} is outside StateDirectory={state:?} and RuntimeDirectory={runtime:?}",
                file.display()
            );
            paths += 1;
        }
    }
    assert!(
        paths >= 3,
        "expected the state directory, the PID file and the dnstap socket, found {paths}"
    );
}

/// What the unit runs, with this build's binary and `examples/skyline.toml` as the
/// configuration file it names, passes `--check-config`; that file stays minimal.
#[test]
fn the_units_command_line_with_the_minimal_example_passes_check_config() {
    let exec = service_words("ExecStart");
    assert_eq!(exec[0], "/usr/local/bin/skyline");
    let config = exec
        .iter()
        .position(|w| w == "--config")
        .expect("ExecStart names no --config")
        + 1;
    assert_eq!(exec[config], "/etc/skyline/skyline.toml");
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/skyline.toml");
    let args: Vec<std::ffi::OsString> = exec[1..]
        .iter()
        .enumerate()
        .map(|(i, w)| {
            if i + 1 == config {
                example.clone().into_os_string()
            } else {
                w.into()
            }
        })
        .collect();
    let out = Command::new(env!("CARGO_BIN_EXE_skyline"))
        .args(&args)
        .arg("--check-config")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    for line in ["domain = \"skydns.local.\"", "http_addr = [\"127.0.0.1:9153\"]"] {
        assert!(stdout.lines().any(|l| l == line), "{line:?} not in:\n{stdout}");
    }
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("# source: the records file ") && l.ends_with("examples/records.json")),
        "{stdout}"
    );
    let table: toml::Table = std::fs::read_to_string(&example).unwrap().parse().unwrap();
    assert!(
        table.values().all(|v| !v.is_table()),
        "the minimal example has tables: {table:?}"
    );
    assert!(
        table.len() <= 5,
        "the minimal example sets {} keys: {:?}",
        table.len(),
        table.keys().collect::<Vec<_>>()
    );
}
