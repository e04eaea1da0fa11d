//! Which upstreams a name outside the zones goes to: a stub zone's servers when the name is in
//! one (SkyDNS `dns/stub/` records, or configured), else the default resolvers.

use crate::wire::name::is_within;
use crate::wire::types::ede;
use crate::wire::{LowerName, Name};

/// A route: index 0 is the default resolvers, `i + 1` the `i`-th stub zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Route(u16);

impl Route {
    /// The default resolvers.
    pub const DEFAULT: Route = Route(0);

    /// The route's index among a worker's upstream groups.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    /// Whether the route leads to a stub zone's servers.
    pub fn is_stub(self) -> bool {
        self.0 != 0
    }
}

/// The routing rules of one forwarding plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routes {
    ndots: u32,
    default: bool,
    stubs: Vec<Name>,
    /// Zones each route does not forward (`except`), by route index; empty when no route has
    /// any, so that routing without them costs one test.
    except: Vec<Vec<Name>>,
}

impl Routes {
    /// Rules for `stubs` (zone apexes, route `i + 1` each), with default resolvers present or
    /// not; names of fewer than `ndots` labels are not sent to the default resolvers (SkyDNS).
    pub fn new(ndots: u32, default: bool, stubs: Vec<Name>) -> Routes {
        let stubs = stubs.into_iter().take(usize::from(u16::MAX) - 1).collect();
        Routes {
            ndots,
            default,
            stubs,
            except: Vec::new(),
        }
    }

    /// The rules with `except[i]`, the zones route `i` does not forward (CoreDNS `except`):
    /// their names have no route, as if no upstream were configured for them.
    pub fn with_except(mut self, except: Vec<Vec<Name>>) -> Routes {
        self.except = if except.iter().any(|zones| !zones.is_empty()) {
            except
        } else {
            Vec::new()
        };
        self
    }

    /// The route of a lower-cased name: the most specific stub zone holding it, else the
    /// default resolvers if there are any; none for a name under one of its route's `except`
    /// zones.
    #[inline(always)]
    pub fn route(&self, qname: &LowerName) -> Option<Route> {
        let route = self.route_of(qname)?;
        if self.except.is_empty() {
            return Some(route);
        }
        let excepted = self
            .except
            .get(route.index())
            .is_some_and(|zones| zones.iter().any(|zone| is_within(qname.wire(), zone.wire())));
        (!excepted).then_some(route)
    }

    #[inline(always)]
    fn route_of(&self, qname: &LowerName) -> Option<Route> {
        if self.stubs.is_empty() {
            return self.default.then_some(Route::DEFAULT);
        }
        let stub = self
            .stubs
            .iter()
            .enumerate()
            .filter(|(_, zone)| is_within(qname.wire(), zone.wire()))
            .max_by_key(|(_, zone)| zone.wire().len());
        match stub {
            Some((i, _)) => Some(Route(i as u16 + 1)),
            None if self.default => Some(Route::DEFAULT),
            None => None,
        }
    }

    /// Labels a name needs before it goes to the default resolvers.
    pub fn ndots(&self) -> u32 {
        self.ndots
    }

    /// Number of routes (groups of upstreams), the default one included.
    pub fn len(&self) -> usize {
        1 + self.stubs.len()
    }

    /// Whether there is no route besides the (possibly empty) default.
    pub fn is_empty(&self) -> bool {
        self.stubs.is_empty() && !self.default
    }
}

/// Why a forwarded question got no answer: the SERVFAIL's Extended DNS Error (RFC 8914).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No upstream answered in time (or all are known to be down).
    Unreachable,
    /// Upstreams answered, but with failures (SERVFAIL, REFUSED) or unreadable messages.
    BadAnswers,
    /// The worker has as many questions in flight as it may: failing fast beats queueing.
    Busy,
    /// The route has as many client queries waiting as its `max_concurrent` allows: REFUSED,
    /// as CoreDNS answers.
    OverConcurrent,
}

impl Failure {
    /// The Extended DNS Error info code.
    pub fn ede(self) -> u16 {
        match self {
            Failure::Unreachable => ede::NO_REACHABLE_AUTHORITY,
            Failure::BadAnswers => ede::NETWORK_ERROR,
            Failure::Busy | Failure::OverConcurrent => ede::OTHER,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lower(s: &str) -> LowerName {
        LowerName::from_wire(Name::from_dotted(s).unwrap().wire()).unwrap()
    }

    #[test]
    fn the_most_specific_stub_zone_wins_then_the_default() {
        let routes = Routes::new(
            2,
            true,
            vec![
                Name::from_dotted("corp.example.").unwrap(),
                Name::from_dotted("lab.corp.example.").unwrap(),
            ],
        );
        assert_eq!(routes.route(&lower("a.corp.example.")), Some(Route(1)));
        assert_eq!(routes.route(&lower("x.lab.corp.example.")), Some(Route(2)));
        assert_eq!(routes.route(&lower("corp.example.")), Some(Route(1)));
        assert_eq!(routes.route(&lower("example.org.")), Some(Route::DEFAULT));
        assert!(routes.route(&lower("a.corp.example.")).unwrap().is_stub());
        assert_eq!(routes.len(), 3);
    }

    #[test]
    fn names_under_an_except_zone_of_their_route_have_no_route() {
        let name = |s: &str| Name::from_dotted(s).unwrap();
        let routes = Routes::new(2, true, vec![name("corp.example.")])
            .with_except(vec![vec![name("internal.example.")], vec![name("lab.corp.example.")]]);
        assert_eq!(routes.route(&lower("www.internal.example.")), None);
        assert_eq!(routes.route(&lower("internal.example.")), None);
        assert_eq!(routes.route(&lower("www.example.")), Some(Route::DEFAULT));
        assert_eq!(routes.route(&lower("x.lab.corp.example.")), None);
        assert_eq!(routes.route(&lower("www.corp.example.")), Some(Route(1)));
        let no_except = Routes::new(2, true, vec![]).with_except(vec![vec![]]);
        assert_eq!(no_except, Routes::new(2, true, vec![]));
    }

    #[test]
    fn without_default_resolvers_only_stub_zones_route() {
        let routes = Routes::new(2, false, vec![Name::from_dotted("corp.example.").unwrap()]);
        assert_eq!(routes.route(&lower("example.org.")), None);
        assert!(routes.route(&lower("www.corp.example.")).is_some());
    }
}
