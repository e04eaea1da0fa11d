//! How one set of upstreams (the default resolvers, or one stub zone's servers) is used: the
//! options of CoreDNS's `forward` block (`policy`, `max_fails`, `health_check`, `except`,
//! `max_concurrent`), each set with its own, so that a Corefile's `forward` blocks map onto
//! sets one for one.

use crate::wire::Name;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Which upstream a question's first try goes to; retries move on to the next upstream that
/// is up, in the set's order, whatever the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// skyline's own: successive questions start at successive upstreams, passing over any
    /// much slower than the fastest but for one try now and then (`--ns-rotate=false` makes it
    /// [`Policy::Sequential`]). A slowed upstream costs few misses and rejoins once fast.
    #[default]
    Fastest,
    /// CoreDNS's default: a random upstream.
    Random,
    /// Successive questions start at successive upstreams, blind to their speed.
    RoundRobin,
    /// The first upstream that is up, always: the others only stand in for it.
    Sequential,
}

impl Policy {
    /// The names the settings and a Corefile spell the policies with.
    pub const NAMES: [&'static str; 4] = ["fastest", "random", "round_robin", "sequential"];
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Policy::Fastest => "fastest",
            Policy::Random => "random",
            Policy::RoundRobin => "round_robin",
            Policy::Sequential => "sequential",
        })
    }
}

/// A policy name that is none of [`Policy::NAMES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown forwarding policy {0:?}: one of fastest, random, round_robin, sequential")]
pub struct UnknownPolicy(pub String);

impl FromStr for Policy {
    type Err = UnknownPolicy;

    fn from_str(text: &str) -> Result<Policy, UnknownPolicy> {
        match text {
            "fastest" => Ok(Policy::Fastest),
            "random" => Ok(Policy::Random),
            "round_robin" => Ok(Policy::RoundRobin),
            "sequential" => Ok(Policy::Sequential),
            _ => Err(UnknownPolicy(text.to_owned())),
        }
    }
}

/// Health checks sent to every upstream of a set from the start, up or down (CoreDNS
/// `health_check`), so that a dead upstream is known before a client waits for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    /// How often each upstream is checked (by one worker at a time).
    pub interval: Duration,
    /// The check's RD flag: off (`no_rec`) for upstreams that answer only what they hold.
    pub recursion_desired: bool,
    /// The name asked, type NS (CoreDNS asks `.`).
    pub domain: Name,
}

impl HealthCheck {
    /// CoreDNS's interval.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(500);
}

/// The options of one set of upstreams.
///
/// | option | default | why |
/// |---|---|---|
/// | `policy` | fastest | skyline's rotation that passes over slow upstreams |
/// | `max_fails` | 3 | failures in a row, over at least 500 ms of silence for client tries, before an upstream is down |
/// | `health_check` | none: only down upstreams are probed, every 500 ms | a check costs every upstream a query per interval |
/// | `except` | none | |
/// | `max_concurrent` | 0: no limit but `max_in_flight` | |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardOptions {
    /// Where first tries go.
    pub policy: Policy,
    /// Failures in a row (tries or health checks) that mark an upstream down; 0 never does.
    pub max_fails: u32,
    /// Health checks from the start; `None` probes only upstreams found down.
    pub health_check: Option<HealthCheck>,
    /// Zones whose names this set does not forward: they get the answer of a name with no
    /// upstream (REFUSED).
    pub except: Vec<Name>,
    /// Client queries waiting on this set's upstreams at once, all workers together; more get
    /// REFUSED (0: no limit).
    pub max_concurrent: usize,
}

impl Default for ForwardOptions {
    fn default() -> ForwardOptions {
        ForwardOptions {
            policy: Policy::default(),
            max_fails: super::MAX_FAILS,
            health_check: None,
            except: Vec::new(),
            max_concurrent: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_read_back_as_they_print() {
        for name in Policy::NAMES {
            assert_eq!(name.parse::<Policy>().unwrap().to_string(), name);
        }
        assert!("least_used".parse::<Policy>().is_err());
    }
}
