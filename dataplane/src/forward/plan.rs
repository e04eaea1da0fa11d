//! What forwarding does, changed while serving: the configuration a reload replaces (upstreams,
//! timeouts, access list, cache limits) and the stub zones a data source reads (SkyDNS's
//! `dns/stub/` records), handed to every worker without stopping it. Configured stub zones stay
//! in every plan and win over a learnt one for the same zone.

use super::{ForwardConfig, Routes, SharedHealth, StubZone};
use arc_swap::ArcSwap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// One generation of forwarding, read by every worker at its next turn.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The configuration; its `stub_zones` are the configured ones.
    pub(crate) config: Arc<ForwardConfig>,
    /// The stub zones, configured ones first; route `i + 1` each.
    pub(crate) zones: Vec<StubZone>,
    /// Health of every route's upstreams for this generation. A worker keeps the health it has
    /// for a route whose servers did not change.
    pub(crate) health: SharedHealth,
}

impl Plan {
    /// The upstreams of each route: the default resolvers, then each stub zone's servers.
    pub(crate) fn groups(&self) -> Vec<&[SocketAddr]> {
        let mut groups = vec![self.config.upstreams.as_slice()];
        groups.extend(self.zones.iter().map(|z| z.servers.as_slice()));
        groups
    }

    /// Which route each name takes.
    pub(crate) fn routes(&self) -> Routes {
        let names = self.zones.iter().map(|z| z.zone.clone()).collect();
        Routes::new(self.config.ndots, !self.config.upstreams.is_empty(), names)
    }
}

/// The handle through which a reload replaces the configuration and a data source the learnt
/// stub zones.
#[derive(Debug, Clone)]
pub struct Forwarding {
    inputs: Arc<Mutex<Inputs>>,
    cell: Arc<ArcSwap<Plan>>,
}

#[derive(Debug)]
struct Inputs {
    config: Arc<ForwardConfig>,
    learnt: Vec<StubZone>,
}

impl Forwarding {
    /// `config` as the first generation.
    pub(crate) fn new(config: &ForwardConfig, now: Instant) -> Forwarding {
        let inputs = Inputs {
            config: Arc::new(config.clone()),
            learnt: Vec::new(),
        };
        let plan = inputs.plan(now);
        Forwarding {
            inputs: Arc::new(Mutex::new(inputs)),
            cell: Arc::new(ArcSwap::from_pointee(plan)),
        }
    }

    /// Replaces the learnt stub zones; workers switch to them on their next turn. Questions in
    /// flight to stub servers that changed end as unanswered.
    pub fn set_learnt_stubs(&self, learnt: Vec<StubZone>) {
        self.update(|inputs| inputs.learnt = learnt);
    }

    /// Replaces the configuration; workers switch to it on their next turn. Questions in flight
    /// keep going unless their servers changed; cached answers stay, evicted down to a smaller
    /// memory bound, and keep the lifetimes they were stored with.
    pub fn reconfigure(&self, config: ForwardConfig) {
        self.update(|inputs| inputs.config = Arc::new(config));
    }

    fn update(&self, change: impl FnOnce(&mut Inputs)) {
        let mut inputs = self.inputs.lock().unwrap_or_else(PoisonError::into_inner);
        change(&mut inputs);
        self.cell.store(Arc::new(inputs.plan(Instant::now())));
    }

    /// The current generation.
    pub(crate) fn current(&self) -> Arc<Plan> {
        self.cell.load_full()
    }

    /// The cell workers watch.
    pub(crate) fn cell(&self) -> Arc<ArcSwap<Plan>> {
        Arc::clone(&self.cell)
    }
}

impl Inputs {
    fn plan(&self, now: Instant) -> Plan {
        let configured = &self.config.stub_zones;
        let mut zones = configured.clone();
        zones.extend(
            self.learnt
                .iter()
                .filter(|z| !z.servers.is_empty() && !configured.iter().any(|c| c.zone == z.zone))
                .cloned(),
        );
        let sizes: Vec<usize> = std::iter::once(self.config.upstreams.len())
            .chain(zones.iter().map(|z| z.servers.len()))
            .collect();
        Plan {
            config: Arc::clone(&self.config),
            zones,
            health: SharedHealth::new(sizes, now),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forward::Transport;
    use crate::wire::Name;

    fn zone(name: &str, port: u16) -> StubZone {
        StubZone {
            zone: Name::from_dotted(name).unwrap(),
            servers: vec![([127, 0, 0, 1], port).into()],
            transport: Transport::PreferUdp,
        }
    }

    #[test]
    fn configured_zones_stay_and_win_over_learnt_ones() {
        let config = ForwardConfig {
            stub_zones: vec![zone("corp.example.", 1)],
            ..ForwardConfig::default()
        };
        let forwarding = Forwarding::new(&config, Instant::now());
        assert_eq!(forwarding.current().zones, [zone("corp.example.", 1)]);
        forwarding.set_learnt_stubs(vec![
            zone("corp.example.", 2),
            zone("lab.example.", 3),
            StubZone {
                zone: Name::from_dotted("empty.example.").unwrap(),
                servers: vec![],
                transport: Transport::PreferUdp,
            },
        ]);
        assert_eq!(
            forwarding.current().zones,
            [zone("corp.example.", 1), zone("lab.example.", 3)]
        );
        forwarding.set_learnt_stubs(Vec::new());
        assert_eq!(forwarding.current().zones, [zone("corp.example.", 1)]);
    }

    #[test]
    fn a_new_configuration_keeps_the_learnt_zones() {
        let forwarding = Forwarding::new(&ForwardConfig::default(), Instant::now());
        forwarding.set_learnt_stubs(vec![zone("lab.example.", 3)]);
        forwarding.reconfigure(ForwardConfig {
            upstreams: vec![([127, 0, 0, 1], 5353).into()],
            stub_zones: vec![zone("corp.example.", 1)],
            ..ForwardConfig::default()
        });
        let plan = forwarding.current();
        assert_eq!(plan.config.upstreams, [([127, 0, 0, 1], 5353).into()]);
        assert_eq!(plan.zones, [zone("corp.example.", 1), zone("lab.example.", 3)]);
    }
}
