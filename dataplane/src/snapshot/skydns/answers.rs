//! Answers per query type for what one lookup selected (SkyDNS `server.go`;
//! docs/skydns-semantics.md, "Answers"). The address, SRV and MX answers live in their own files;
//! the small ones are here.

use super::address::{Family, Resolutions};
use super::entry::{split255, Host};
use super::index::Index;
use super::section::{answer_set, Rr, Section};
use super::select::{Audience, Selection};
use crate::snapshot::rrset::{Alias, AnswerSet, Rdata};
use crate::snapshot::Slot;
use crate::wire::Name;

/// Why an answer was not built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abort {
    /// The answer section cannot fit in any DNS message.
    TooLarge,
    /// CNAME chasing needed more lookups than the bound allows (a pathological fan-out).
    Exhausted,
}

/// Resolutions of CNAME targets a single answer may ask for before it is given up, on top of
/// [`BUDGET_PER_RECORD`] for each record the answer starts from. A chain costs one per CNAME;
/// the bound keeps fan-outs of distinct chains (exponential in their length) from stalling a build.
const BUDGET_BASE: usize = 64;
/// See [`BUDGET_BASE`].
const BUDGET_PER_RECORD: usize = 8;

/// Builds answers from an [`Index`] for one class of clients at a time, remembering resolved
/// CNAME targets across the answers it builds (they depend only on the target, the address
/// family, the chain so far and the class).
pub struct Answerer<'a> {
    /// The records.
    pub(super) index: &'a Index,
    /// The class answered, and the prefixes of the view maps read.
    pub(super) audience: Audience,
    /// Resolved CNAME targets and SRV/MX glue.
    pub(super) memo: Resolutions,
    /// Target lookups left for the answer being built.
    pub(super) budget: usize,
    /// Whether running out of budget was already logged.
    pub(super) warned: bool,
}

impl AsMut<Audience> for Answerer<'_> {
    fn as_mut(&mut self) -> &mut Audience {
        &mut self.audience
    }
}

impl<'a> Answerer<'a> {
    /// An answerer with nothing remembered yet.
    pub fn new(index: &'a Index) -> Answerer<'a> {
        Answerer {
            index,
            audience: Audience::default(),
            memo: Resolutions::default(),
            budget: 0,
            warned: false,
        }
    }

    /// The answer to a query of type `slot` for `query`, whose lookup selected `sel`, with
    /// records owned by the query name. NS, SOA and PTR are never answered from a selection.
    pub fn answer(&mut self, sel: &Selection<'_>, query: &Name, slot: Slot) -> Result<Option<AnswerSet>, Abort> {
        self.budget = BUDGET_BASE + BUDGET_PER_RECORD * sel.deduped().len();
        // Types no record of the whole index can feed are empty without a scan of the run.
        let kinds = &self.index.kinds;
        let fed = match slot {
            Slot::A => kinds.v4_or_name,
            Slot::Aaaa => kinds.v6_or_name,
            Slot::Txt => kinds.text,
            Slot::Mx => kinds.mail,
            Slot::Srv | Slot::Cname | Slot::Ns | Slot::Soa | Slot::Ptr => 1,
        };
        if fed == 0 {
            return Ok(None);
        }
        let (answer, additional) = match slot {
            Slot::A | Slot::Aaaa => {
                let family = if slot == Slot::A { Family::V4 } else { Family::V6 };
                let found = self.addresses(sel, query, None, family, &mut Vec::new())?;
                return Ok(self.finish(found.section, Section::default(), found.beyond));
            }
            Slot::Srv => {
                let (answer, additional) = self.srv(sel)?;
                (answer, Some(additional))
            }
            Slot::Mx => {
                let (answer, additional) = self.mx(sel)?;
                (answer, Some(additional))
            }
            Slot::Txt => (self.txt(sel)?, None),
            Slot::Cname => (self.cname(sel), None),
            Slot::Ns | Slot::Soa | Slot::Ptr => return Ok(None),
        };
        Ok(self.finish(answer, additional.unwrap_or_default(), Vec::new()))
    }

    /// NS at the apex (docs/skydns-semantics.md, "NS at the apex") from the lookup of
    /// `ns.dns.<domain>`: one NS per address record, named by its key, with the address as glue.
    /// Records with a name host are skipped.
    pub fn ns(&mut self, sel: &Selection<'_>) -> Result<Option<AnswerSet>, Abort> {
        let index = self.index;
        let mut answer = Section::default();
        let mut additional = Section::default();
        for &e in sel.grouped() {
            let glue = match e.host() {
                Host::V4(ip) => Rdata::A(ip),
                Host::V6(ip) => Rdata::Aaaa(ip),
                Host::None | Host::Name(_) => {
                    tracing::warn!(ns = %e.name(), "skipping SkyDNS nameserver record whose host is not an IP address");
                    continue;
                }
            };
            let target = e.name();
            let ttl = index.ttl_of(e);
            answer.push(Rr::at_query(ttl, Rdata::Ns(target.clone())));
            additional.push(Rr {
                owner: Some(target),
                ttl,
                rdata: glue,
            });
            if answer.is_full() {
                return Err(Abort::TooLarge);
            }
        }
        Ok(self.finish(answer, additional, Vec::new()))
    }

    /// TXT (docs/skydns-semantics.md, "TXT"): one record per record with text, split into 255-byte
    /// strings.
    fn txt(&mut self, sel: &Selection<'_>) -> Result<Section<'static>, Abort> {
        let mut answer = Section::default();
        for &e in sel.grouped() {
            if e.text().is_empty() {
                continue;
            }
            answer.push(Rr::at_query(self.index.ttl_of(e), Rdata::Txt(split255(e.text()))));
            if answer.is_full() {
                return Err(Abort::TooLarge);
            }
        }
        Ok(answer)
    }

    /// CNAME (docs/skydns-semantics.md, "CNAME queries"): nothing, since no SkyDNS name is an
    /// alias; with `--cname-chains`, nothing for a directory and, for a key, its first record's
    /// host if a name, without chasing.
    fn cname(&mut self, sel: &Selection<'_>) -> Section<'static> {
        let mut answer = Section::default();
        if sel.directory || !self.index.cname_chains {
            return answer;
        }
        if let Some(&e) = sel.grouped().first() {
            if let Host::Name(target) = e.host() {
                answer.push(Rr::at_query(self.index.ttl_of(e), Rdata::Cname(target)));
            }
        }
        answer
    }

    /// The answer, unless it has no records and names no target outside the domain.
    fn finish(&self, answer: Section<'_>, additional: Section<'_>, beyond: Vec<Alias>) -> Option<AnswerSet> {
        if answer.is_empty() && beyond.is_empty() {
            return None;
        }
        let mut set = answer_set(
            answer.into_rrs(),
            additional.into_rrs(),
            self.index.ttl,
            self.index.round_robin,
        );
        set.flattened = beyond;
        Some(set)
    }

    /// The records a lookup of `name` returns for the class answered, noting the view maps it
    /// reads.
    pub(super) fn lookup(&mut self, name: &Name) -> Option<Selection<'a>> {
        self.index.lookup(name, &mut self.audience)
    }

    /// Logs, once per answerer, that an answer was given up for its CNAME fan-out.
    pub(super) fn exhausted(&mut self, target: &Name) -> Abort {
        if !self.warned {
            self.warned = true;
            tracing::warn!(%target, "SkyDNS CNAME chasing exceeded its lookup bound; answering as too large");
        }
        Abort::Exhausted
    }
}
