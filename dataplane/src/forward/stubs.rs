//! Stub zones that change while serving: SkyDNS's `dns/stub/` records, read by a data source
//! and handed to every worker without stopping it. Configured stub zones stay in every set and
//! win over a learnt one for the same zone.

use super::{ForwardConfig, SharedHealth, StubZone};
use arc_swap::ArcSwap;
use std::sync::Arc;
use std::time::Instant;

/// One generation of stub zones, with fresh health for their servers (shared by the workers).
#[derive(Debug)]
pub(crate) struct StubSet {
    /// The zones, configured ones first; route `i + 1` each.
    pub(crate) zones: Vec<StubZone>,
    /// Health of every route's upstreams for this generation (route 0, the default resolvers,
    /// keeps the health it started with).
    pub(crate) health: SharedHealth,
}

/// The handle through which a data source replaces the learnt stub zones.
#[derive(Debug, Clone)]
pub struct StubZones {
    configured: Vec<StubZone>,
    upstreams: usize,
    cell: Arc<ArcSwap<StubSet>>,
}

impl StubZones {
    /// The configured stub zones of `config`, as the first generation.
    pub(crate) fn new(config: &ForwardConfig, now: Instant) -> StubZones {
        let set = StubSet {
            zones: config.stub_zones.clone(),
            health: config.health(now),
        };
        StubZones {
            configured: config.stub_zones.clone(),
            upstreams: config.upstreams.len(),
            cell: Arc::new(ArcSwap::from_pointee(set)),
        }
    }

    /// Replaces the learnt stub zones; workers switch to them on their next turn. Questions in
    /// flight to stub servers when that happens end as unanswered.
    pub fn set(&self, learnt: Vec<StubZone>) {
        let mut zones = self.configured.clone();
        zones.extend(
            learnt
                .into_iter()
                .filter(|z| !z.servers.is_empty() && !self.configured.iter().any(|c| c.zone == z.zone)),
        );
        let sizes = std::iter::once(self.upstreams).chain(zones.iter().map(|z| z.servers.len()));
        let health = SharedHealth::new(sizes, Instant::now());
        self.cell.store(Arc::new(StubSet { zones, health }));
    }

    /// The current generation.
    pub(crate) fn current(&self) -> Arc<StubSet> {
        self.cell.load_full()
    }

    /// The cell workers watch.
    pub(crate) fn cell(&self) -> Arc<ArcSwap<StubSet>> {
        Arc::clone(&self.cell)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Name;

    fn zone(name: &str, port: u16) -> StubZone {
        StubZone {
            zone: Name::from_dotted(name).unwrap(),
            servers: vec![([127, 0, 0, 1], port).into()],
        }
    }

    #[test]
    fn configured_zones_stay_and_win_over_learnt_ones() {
        let config = ForwardConfig {
            stub_zones: vec![zone("corp.example.", 1)],
            ..ForwardConfig::default()
        };
        let stubs = StubZones::new(&config, Instant::now());
        assert_eq!(stubs.current().zones, [zone("corp.example.", 1)]);
        stubs.set(vec![
            zone("corp.example.", 2),
            zone("lab.example.", 3),
            StubZone {
                zone: Name::from_dotted("empty.example.").unwrap(),
                servers: vec![],
            },
        ]);
        assert_eq!(
            stubs.current().zones,
            [zone("corp.example.", 1), zone("lab.example.", 3)]
        );
        stubs.set(Vec::new());
        assert_eq!(stubs.current().zones, [zone("corp.example.", 1)]);
    }
}
