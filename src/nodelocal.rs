//! Node-local cache set-up, as NodeLocal DNSCache does it: a dummy interface (an empty bridge
//! on kernels built without dummy interfaces) holding the
//! addresses skyline listens on (the link-local 169.254.20.10, often the cluster DNS service IP
//! too), and NOTRACK rules so that DNS to and from them skips connection tracking, whose table
//! fills up under DNS load and drops queries. Both are made before the sockets are bound and
//! removed when skyline exits after its drain; a process that hands its sockets to a new one in
//! an in-place upgrade leaves them to it.
//!
//! The work is done by `ip` (iproute2) and `nft` (nftables), as an operator would do it by hand,
//! so that what skyline changed can be read and undone with the same tools.

use std::net::{IpAddr, SocketAddr};
use std::process::{Command, Stdio};

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

/// What was set up, to be removed again.
#[derive(Debug)]
pub struct NodeLocal {
    interface: Option<String>,
    /// The interface existed before: it is left in place on exit.
    interface_found: bool,
    notrack: Option<String>,
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
        let mut done = NodeLocal {
            interface: None,
            interface_found: false,
            notrack: None,
        };
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
        if let Some(name) = interface {
            valid_name(name)?;
            let found = ip(&["link", "show", "dev", name]).is_ok();
            if !found {
                if let Err(dummy) = ip(&["link", "add", name, "type", "dummy"]) {
                    // A kernel built without dummy interfaces (CONFIG_DUMMY) still has bridges:
                    // one without ports holds local addresses just as well.
                    ip(&["link", "add", name, "type", "bridge"]).map_err(|_| dummy)?;
                    tracing::warn!(
                        interface = name,
                        "the kernel has no dummy interfaces; an empty bridge holds the addresses"
                    );
                }
            }
            done.interface_found = found && !handed_over;
            done.interface = Some(name.to_owned());
            for addr in &ips {
                let prefix = if addr.is_ipv4() { 32 } else { 128 };
                let cidr = format!("{addr}/{prefix}");
                let listed = ip(&["-o", "addr", "show", "dev", name])?;
                if !listed.split_whitespace().any(|word| word == cidr) {
                    ip(&["addr", "add", &cidr, "dev", name])?;
                }
            }
            ip(&["link", "set", "dev", name, "up"])?;
            tracing::info!(interface = name, addresses = %ips.iter().map(ToString::to_string).collect::<Vec<_>>().join(","), "node-local interface set up");
        }
        if notrack {
            let table = table_name(interface.unwrap_or("nodelocal"));
            nft(&notrack_rules(&table, &ips))?;
            tracing::info!(table = %table, addresses = %ips.iter().map(ToString::to_string).collect::<Vec<_>>().join(","), "NOTRACK rules for DNS installed");
            done.notrack = Some(table);
        }
        Ok(done)
    }

    /// Removes what [`NodeLocal::set_up`] made; errors are logged, since this runs on the way
    /// out. An interface that existed before is left.
    pub fn tear_down(self) {
        if let Some(table) = &self.notrack {
            if let Err(e) = nft(&format!("delete table inet {table}\n")) {
                tracing::warn!(error = %e, "removing the NOTRACK rules failed");
            }
        }
        if let Some(name) = self.interface.as_deref().filter(|_| !self.interface_found) {
            if let Err(e) = ip(&["link", "del", "dev", name]) {
                tracing::warn!(error = %e, "removing the node-local interface failed");
            }
        }
    }
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
    fn interface_names_are_checked() {
        assert!(valid_name("nodelocaldns").is_ok());
        assert!(valid_name("a-very-long-interface-name").is_err());
        assert!(valid_name("bad name").is_err());
        assert!(valid_name("").is_err());
        assert_eq!(table_name("node.local-0"), "skyline_node_local_0");
    }
}
