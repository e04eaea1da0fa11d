//! Node-local cache set-up, as NodeLocal DNSCache does it: a dummy interface (an empty bridge
//! on kernels built without dummy interfaces) holding the
//! addresses skyline listens on (the link-local 169.254.20.10, often the cluster DNS service IP
//! too), and NOTRACK rules so that DNS to and from them skips connection tracking, whose table
//! fills up under DNS load and drops queries. Both are made before the sockets are bound and
//! removed when skyline exits after its drain; a process that hands its sockets to a new one in
//! an in-place upgrade leaves them to it.
//!
//! The NOTRACK rules go where the node keeps its own: into iptables when `iptables-save` lists
//! a rule (kube-proxy in iptables mode, a distribution firewall), as NodeLocal DNSCache's
//! node-cache writes them, otherwise into an nftables table of skyline's own. `skyline
//! node-cache` also checks both every sync interval and restores what was removed
//! ([`NodeLocal::keep`]).
//!
//! The work is done by `ip` (iproute2), `nft` (nftables) and `iptables`, as an operator would
//! do it by hand, so that what skyline changed can be read and undone with the same tools.

use std::net::{IpAddr, SocketAddr};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The DNS port the NOTRACK rules exempt.
const DNS_PORT: u16 = 53;

/// What a start asks of the node-local set-up beyond making it: `skyline node-cache`'s
/// periodic check, `-skipteardown`, and its claim on what a previous pod left.
#[derive(Debug, Clone, Copy, Default)]
pub struct Upkeep {
    /// How often the interface and the rules are checked and restored; `None`: never.
    pub check_every: Option<Duration>,
    /// Leave the interface and the rules in place at exit.
    pub keep_on_exit: bool,
    /// An interface found at start is this process's to remove at exit: node-cache's pods make
    /// and remove it, and one found was left by a pod that did not finish.
    pub owned: bool,
}

/// The nftables table holding the NOTRACK rules of one interface's addresses.
fn table_name(interface: &str) -> String {
    let safe: String = interface
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("skyline_{safe}")
}

/// Why the set-up failed.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A program could not be run at all.
    #[error("cannot run {program} (Debian package {package}): {source}")]
    Spawn {
        /// The program.
        program: &'static str,
        /// Where it comes from.
        package: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// A program ran and failed.
    #[error("{command} failed: {stderr}")]
    Failed {
        /// The command line.
        command: String,
        /// What it said.
        stderr: String,
    },
    /// The interface name is not one the kernel takes.
    #[error("interface name {0:?}: 1 to 15 characters, letters, digits, '-', '_' or '.'")]
    Name(String),
}

/// What was set up, to be checked, restored and removed again.
#[derive(Debug)]
pub struct NodeLocal {
    interface: Option<String>,
    /// The interface existed before: it is left in place on exit.
    interface_found: bool,
    /// The addresses held and exempted.
    ips: Vec<IpAddr>,
    notrack: Option<Notrack>,
}

/// Where the NOTRACK rules live.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Notrack {
    /// A table of skyline's own, replaced as a whole by `script`.
    Nftables { table: String, script: String },
    /// Rules in the node's iptables chains, node-cache's.
    Iptables(Vec<IptablesRule>),
}

/// One iptables rule: its program (`iptables` or `ip6tables`), table, chain and match.
#[derive(Debug, Clone, PartialEq, Eq)]
struct IptablesRule {
    program: &'static str,
    table: &'static str,
    chain: &'static str,
    spec: Vec<String>,
}

impl IptablesRule {
    fn args<'a>(&'a self, action: &'a str) -> Vec<&'a str> {
        let mut args = vec!["-w", "5", "-t", self.table, action, self.chain];
        args.extend(self.spec.iter().map(String::as_str));
        args
    }

    /// Whether the rule is there.
    fn exists(&self) -> Result<bool, SetupError> {
        match run(self.program, "iptables", &self.args("-C"), None) {
            Ok(_) => Ok(true),
            Err(SetupError::Failed { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Puts the rule first in its chain unless it is there; whether it was added.
    fn ensure(&self) -> Result<bool, SetupError> {
        if self.exists()? {
            return Ok(false);
        }
        run(self.program, "iptables", &self.args("-I"), None)?;
        Ok(true)
    }

    /// Deletes every copy of the rule.
    fn remove(&self) -> Result<(), SetupError> {
        while self.exists()? {
            run(self.program, "iptables", &self.args("-D"), None)?;
        }
        Ok(())
    }
}

impl NodeLocal {
    /// Creates the dummy interface `interface` (if asked) holding the IP addresses of `addrs`,
    /// and the NOTRACK rules for port 53 of those addresses (if `notrack`). What already exists
    /// (an interface a previous process made, the address on it) is taken as it is, and left in
    /// place on exit unless `handed_over`: a process this one replaces made it for both.
    pub fn set_up(
        interface: Option<&str>,
        notrack: bool,
        addrs: &[SocketAddr],
        handed_over: bool,
    ) -> Result<NodeLocal, SetupError> {
        let ips: Vec<IpAddr> = {
            let mut ips: Vec<IpAddr> = addrs
                .iter()
                .map(SocketAddr::ip)
                .filter(|ip| !ip.is_unspecified())
                .collect();
            ips.sort();
            ips.dedup();
            ips
        };
        let mut done = NodeLocal {
            interface: None,
            interface_found: false,
            ips,
            notrack: None,
        };
        let listed = done.ips.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
        if let Some(name) = interface {
            valid_name(name)?;
            let found = ip(&["link", "show", "dev", name]).is_ok();
            done.interface_found = found && !handed_over;
            done.interface = Some(name.to_owned());
            ensure_interface(name, &done.ips)?;
            tracing::info!(interface = name, addresses = %listed, "node-local interface set up");
        }
        if notrack {
            let rules = if node_uses_iptables() {
                Notrack::Iptables(iptables_rules(&done.ips))
            } else {
                let table = table_name(interface.unwrap_or("nodelocal"));
                let script = notrack_rules(&table, &done.ips);
                Notrack::Nftables { table, script }
            };
            let restored = ensure_notrack(&rules);
            done.notrack = Some(rules);
            if let Err(e) = restored {
                done.tear_down();
                return Err(e);
            }
            match &done.notrack {
                Some(Notrack::Nftables { table, .. }) => {
                    tracing::info!(table = %table, addresses = %listed, "NOTRACK rules for DNS installed (nftables)");
                }
                _ => {
                    tracing::info!(addresses = %listed, "NOTRACK rules for DNS installed (iptables, as the node's rules)")
                }
            }
        }
        Ok(done)
    }

    /// Makes again what was removed since the set-up (the interface, an address, the link
    /// state, a NOTRACK rule), logging each; errors are logged, to be retried at the next check.
    pub fn restore(&self) {
        if let Some(name) = &self.interface {
            match ensure_interface(name, &self.ips) {
                Ok(true) => tracing::warn!(interface = %name, "the node-local interface was changed: restored"),
                Ok(false) => {}
                Err(e) => tracing::error!(error = %e, "restoring the node-local interface failed"),
            }
        }
        if let Some(rules) = &self.notrack {
            match ensure_notrack(rules) {
                Ok(true) => tracing::warn!("NOTRACK rules for DNS were removed: restored"),
                Ok(false) => {}
                Err(e) => tracing::error!(error = %e, "restoring the NOTRACK rules failed"),
            }
        }
    }

    /// Checks and restores the set-up every `every` on a thread of its own, until
    /// [`Keeper::stop`].
    pub fn keep(self, every: Duration) -> std::io::Result<Keeper> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("skyline-nodelocal".to_owned())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    self.restore();
                }
                self
            })?;
        Ok(Keeper { stop, thread })
    }

    /// Removes what [`NodeLocal::set_up`] made; errors are logged, since this runs on the way
    /// out. An interface that existed before is left.
    pub fn tear_down(self) {
        let removed = match &self.notrack {
            Some(Notrack::Nftables { table, .. }) => nft(&format!("delete table inet {table}\n")).map(drop),
            Some(Notrack::Iptables(rules)) => rules.iter().try_for_each(IptablesRule::remove),
            None => Ok(()),
        };
        if let Err(e) = removed {
            tracing::warn!(error = %e, "removing the NOTRACK rules failed");
        }
        if let Some(name) = self.interface.as_deref().filter(|_| !self.interface_found) {
            if let Err(e) = ip(&["link", "del", "dev", name]) {
                tracing::warn!(error = %e, "removing the node-local interface failed");
            }
        }
    }
}

/// The set-up's periodic check, on its own thread.
#[derive(Debug)]
pub struct Keeper {
    stop: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<NodeLocal>,
}

impl Keeper {
    /// Ends the checks (a check under way finishes first, so none runs after this returns)
    /// and gives the set-up back, to be torn down or left.
    pub fn stop(self) -> Option<NodeLocal> {
        drop(self.stop);
        self.thread
            .join()
            .inspect_err(|_| tracing::error!("the node-local check thread panicked"))
            .ok()
    }
}

/// Whether the node keeps its packet filter rules in iptables: `iptables-save` lists a rule
/// (kube-proxy in iptables mode always has some). A node without iptables, or whose iptables
/// is empty, gets an nftables table.
fn node_uses_iptables() -> bool {
    run("iptables-save", "iptables", &[], None).is_ok_and(|rules| rules.lines().any(|l| l.starts_with("-A ")))
}

/// Creates the interface `name` if it is missing, puts each of `ips` on it and sets it up;
/// whether anything had to be done.
fn ensure_interface(name: &str, ips: &[IpAddr]) -> Result<bool, SetupError> {
    let mut changed = false;
    if ip(&["link", "show", "dev", name]).is_err() {
        if let Err(dummy) = ip(&["link", "add", name, "type", "dummy"]) {
            // A kernel built without dummy interfaces (CONFIG_DUMMY) still has bridges: one
            // without ports holds local addresses just as well.
            ip(&["link", "add", name, "type", "bridge"]).map_err(|_| dummy)?;
            tracing::warn!(
                interface = name,
                "the kernel has no dummy interfaces; an empty bridge holds the addresses"
            );
        }
        changed = true;
    }
    let listed = ip(&["-o", "addr", "show", "dev", name])?;
    for addr in ips {
        let prefix = if addr.is_ipv4() { 32 } else { 128 };
        let cidr = format!("{addr}/{prefix}");
        if !listed.split_whitespace().any(|word| word == cidr) {
            ip(&["addr", "add", &cidr, "dev", name])?;
            changed = true;
        }
    }
    let link = ip(&["-o", "link", "show", "dev", name])?;
    let up = link
        .split(['<', '>'])
        .nth(1)
        .is_some_and(|flags| flags.split(',').any(|f| f == "UP"));
    if !up {
        ip(&["link", "set", "dev", name, "up"])?;
        changed = true;
    }
    Ok(changed)
}

/// Installs whichever of `rules` is missing; whether any was.
fn ensure_notrack(rules: &Notrack) -> Result<bool, SetupError> {
    match rules {
        Notrack::Nftables { table, script } => {
            let expected = script.matches(" notrack\n").count();
            let listed = nft_list_table(table).unwrap_or_default();
            if listed.matches(" notrack").count() == expected {
                return Ok(false);
            }
            nft(script)?;
            Ok(true)
        }
        Notrack::Iptables(rules) => {
            let mut added = false;
            for rule in rules {
                added |= rule.ensure()?;
            }
            Ok(added)
        }
    }
}

/// node-cache's rules for port 53 of each of `ips`: NOTRACK in the raw table for queries
/// arriving (PREROUTING) and for the answers and the node's own queries (OUTPUT), and ACCEPT in
/// the filter table, whose rules for tracked connections no longer see these packets as
/// established.
fn iptables_rules(ips: &[IpAddr]) -> Vec<IptablesRule> {
    let mut rules = Vec::new();
    for ip in ips {
        let program = if ip.is_ipv4() { "iptables" } else { "ip6tables" };
        let ip = ip.to_string();
        let port = DNS_PORT.to_string();
        let shapes: [(&str, &str, &str, &str, &str); 5] = [
            ("raw", "PREROUTING", "-d", "--dport", "NOTRACK"),
            ("filter", "INPUT", "-d", "--dport", "ACCEPT"),
            ("raw", "OUTPUT", "-s", "--sport", "NOTRACK"),
            ("filter", "OUTPUT", "-s", "--sport", "ACCEPT"),
            ("raw", "OUTPUT", "-d", "--dport", "NOTRACK"),
        ];
        for (table, chain, direction, port_match, target) in shapes {
            for proto in ["tcp", "udp"] {
                rules.push(IptablesRule {
                    program,
                    table,
                    chain,
                    spec: ["-p", proto, direction, &ip, port_match, &port, "-j", target]
                        .map(str::to_owned)
                        .to_vec(),
                });
            }
        }
    }
    rules
}

/// The nftables script that (re)creates `table` with NOTRACK for DNS to and from `ips`, in the
/// raw-priority chains where connection tracking has not yet seen the packet: queries arriving
/// (prerouting), and in output the answers and the queries of the node's own processes
/// (host-network pods, the kubelet), which conntrack takes up in output, not in prerouting.
/// The node-local DaemonSet's init container installs the same rules
/// (`deploy/node-local/node-local.yaml`).
fn notrack_rules(table: &str, ips: &[IpAddr]) -> String {
    let set = |v4: bool| {
        let list: Vec<String> = ips
            .iter()
            .filter(|ip| ip.is_ipv4() == v4)
            .map(ToString::to_string)
            .collect();
        (!list.is_empty()).then(|| list.join(", "))
    };
    let mut rules_in = String::new();
    let mut rules_out = String::new();
    for (family, list) in [("ip", set(true)), ("ip6", set(false))] {
        let Some(list) = list else {
            continue;
        };
        for proto in ["udp", "tcp"] {
            rules_in.push_str(&format!("    {family} daddr {{ {list} }} {proto} dport 53 notrack\n"));
        }
    }
    for (direction, port) in [("daddr", "dport"), ("saddr", "sport")] {
        for (family, list) in [("ip", set(true)), ("ip6", set(false))] {
            let Some(list) = list else {
                continue;
            };
            for proto in ["udp", "tcp"] {
                rules_out.push_str(&format!(
                    "    {family} {direction} {{ {list} }} {proto} {port} 53 notrack\n"
                ));
            }
        }
    }
    format!(
        "table inet {table}\ndelete table inet {table}\ntable inet {table} {{\n  chain prerouting {{\n    type filter hook \
         prerouting priority raw; policy accept;\n{rules_in}  }}\n  chain output {{\n    type filter hook output priority \
         raw; policy accept;\n{rules_out}  }}\n}}\n"
    )
}

fn valid_name(name: &str) -> Result<(), SetupError> {
    let ok = (1..=15).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    ok.then_some(()).ok_or_else(|| SetupError::Name(name.to_owned()))
}

/// Runs `ip` with `args`; its standard output.
fn ip(args: &[&str]) -> Result<String, SetupError> {
    run("ip", "iproute2", args, None)
}

/// `nft list table inet TABLE`, or `None` when there is no such table.
fn nft_list_table(table: &str) -> Option<String> {
    run("nft", "nftables", &["list", "table", "inet", table], None).ok()
}

/// Runs `nft -f -` with `script` on its standard input.
fn nft(script: &str) -> Result<String, SetupError> {
    run("nft", "nftables", &["-f", "-"], Some(script))
}

fn run(program: &'static str, package: &'static str, args: &[&str], input: Option<&str>) -> Result<String, SetupError> {
    use std::io::Write as _;
    let spawn = |source| SetupError::Spawn {
        program,
        package,
        source,
    };
    let mut child = Command::new(program)
        .args(args)
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn)?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(text.as_bytes()).map_err(spawn)?;
    }
    let out = child.wait_with_output().map_err(spawn)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(SetupError::Failed {
            command: format!("{program} {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notrack_rules_cover_both_directions_and_protocols_per_family() {
        let ips: Vec<IpAddr> = vec!["169.254.20.10".parse().unwrap(), "fd00::a".parse().unwrap()];
        let script = notrack_rules("skyline_nodelocal", &ips);
        for line in [
            "ip daddr { 169.254.20.10 } udp dport 53 notrack",
            "ip daddr { 169.254.20.10 } tcp dport 53 notrack",
            "ip saddr { 169.254.20.10 } udp sport 53 notrack",
            "ip6 daddr { fd00::a } tcp dport 53 notrack",
            "ip6 saddr { fd00::a } udp sport 53 notrack",
            "type filter hook prerouting priority raw",
            "type filter hook output priority raw",
        ] {
            assert!(script.contains(line), "{line:?} not in\n{script}");
        }
        // The node's own queries to the cache pass output, not prerouting.
        let output = script.split("chain output").nth(1).unwrap();
        for line in [
            "ip daddr { 169.254.20.10 } udp dport 53 notrack",
            "ip daddr { 169.254.20.10 } tcp dport 53 notrack",
            "ip6 daddr { fd00::a } udp dport 53 notrack",
        ] {
            assert!(output.contains(line), "{line:?} not in the output chain\n{script}");
        }
        assert!(script.starts_with("table inet skyline_nodelocal\ndelete table inet skyline_nodelocal\n"));
    }

    #[test]
    fn iptables_rules_are_node_caches_for_each_address_and_protocol() {
        let rules = iptables_rules(&["169.254.20.10".parse().unwrap(), "fd00::a".parse().unwrap()]);
        assert_eq!(rules.len(), 20);
        let written: Vec<String> = rules
            .iter()
            .map(|r| format!("{} -t {} -A {} {}", r.program, r.table, r.chain, r.spec.join(" ")))
            .collect();
        for line in [
            "iptables -t raw -A PREROUTING -p udp -d 169.254.20.10 --dport 53 -j NOTRACK",
            "iptables -t raw -A PREROUTING -p tcp -d 169.254.20.10 --dport 53 -j NOTRACK",
            "iptables -t filter -A INPUT -p udp -d 169.254.20.10 --dport 53 -j ACCEPT",
            "iptables -t raw -A OUTPUT -p udp -s 169.254.20.10 --sport 53 -j NOTRACK",
            "iptables -t filter -A OUTPUT -p tcp -s 169.254.20.10 --sport 53 -j ACCEPT",
            "iptables -t raw -A OUTPUT -p udp -d 169.254.20.10 --dport 53 -j NOTRACK",
            "ip6tables -t raw -A PREROUTING -p udp -d fd00::a --dport 53 -j NOTRACK",
        ] {
            assert!(written.contains(&line.to_owned()), "{line:?} not in {written:#?}");
        }
        assert_eq!(
            rules[0].args("-C"),
            [
                "-w",
                "5",
                "-t",
                "raw",
                "-C",
                "PREROUTING",
                "-p",
                "tcp",
                "-d",
                "169.254.20.10",
                "--dport",
                "53",
                "-j",
                "NOTRACK"
            ]
        );
    }

    #[test]
    fn interface_names_are_checked() {
        assert!(valid_name("nodelocaldns").is_ok());
        assert!(valid_name("a-very-long-interface-name").is_err());
        assert!(valid_name("bad name").is_err());
        assert!(valid_name("").is_err());
        assert_eq!(table_name("node.local-0"), "skyline_node_local_0");
    }
}
