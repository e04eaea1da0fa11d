//! CoreDNS's per-query plugins that change a question or make its answer, as skyline runs
//! them (docs/rewrite.md): `rewrite` (the question rewritten before it is looked up, in the
//! zones, the cache and forwarding alike, and the reply turned back for the client), `template`
//! (answers and denials made from a name's match), `whoami` and `chaos`.
//!
//! Everything is parsed and compiled once, at configuration ([`Plugins::new`]). The answer path
//! reaches them through [`crate::Context::plugins`]: without any configured, a query pays one
//! branch on that `None`. With them, `Plugins::plan` runs ahead of answering: it rewrites
//! the question, makes its answer from a template, `whoami` or `any`, or lets it through; a
//! rewritten question is answered as any other, then `Rewritten::restore` writes the reply the
//! client gets. The plugins write no reply themselves: the answer path writes what they made
//! with its message builder (`answer/plugins.rs`), so that this module sits below answering and
//! knows only the vocabulary of a reply (`crate::reply`). A rule that does not match a name
//! allocates nothing; a regex rule that matches, and a template that writes records, allocate
//! for their groups and records.

mod back;
mod rule;
mod template;
mod text;

use crate::io::Peer;
use crate::reply::{note, size_limit, Outcome, Reply, Transport};
use crate::wire::query::parse_query_into;
use crate::wire::types::{class, rcode, rtype, HEADER_LEN, MAX_NAME_LEN};
use crate::wire::{LowerName, Query};
use rule::{Rule, Then};
use template::{Facts, Template, Verdict};
use text::{absolute, within, Text};

/// A `rewrite` rule that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleError {
    /// The rule's shape is wrong.
    #[error("{0}")]
    Form(&'static str),
    /// A field skyline does not rewrite (`ttl`, `edns0`, ...).
    #[error("the field {0:?} is not rewritten (name, type or class)")]
    Field(String),
    /// No such type.
    #[error("{0:?} is no record type")]
    Type(String),
    /// No such class.
    #[error("{0:?} is no class")]
    Class(String),
    /// A regular expression that does not compile.
    #[error("regex {regex:?}: {reason}")]
    Regex {
        /// The expression.
        regex: String,
        /// Why it does not compile.
        reason: String,
    },
}

/// A `template` block that does not parse, or a record it makes that is no record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// The block's shape is wrong.
    #[error("{0}")]
    Form(&'static str),
    /// No such type.
    #[error("{0:?} is no record type")]
    Type(String),
    /// No such class.
    #[error("{0:?} is no class")]
    Class(String),
    /// No such response code.
    #[error("{0:?} is no response code")]
    Rcode(String),
    /// A statement templates do not have here (`upstream`, `ederror`, ...).
    #[error("the statement {0:?} is not supported (match, answer, authority, additional, rcode, fallthrough)")]
    Statement(String),
    /// A template action other than the question's facts and the match's groups.
    #[error("the action {{{{ {0} }}}} is not supported")]
    Action(String),
    /// A regular expression that does not compile.
    #[error("regex {regex:?}: {reason}")]
    Regex {
        /// The expression.
        regex: String,
        /// Why it does not compile.
        reason: String,
    },
    /// A filled-in record that does not read as a zone-file record of a supported type.
    #[error("{0:?} is no record skyline can write (A, AAAA, CNAME, NS, PTR, MX, SRV, TXT)")]
    Record(String),
}

/// Why the plugins' configuration was refused; each names the rule or block at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// A `rewrite` rule.
    #[error("rewrite rule {rule:?}: {error}")]
    Rewrite {
        /// The rule as given.
        rule: String,
        /// What is wrong with it.
        error: RuleError,
    },
    /// A `template` block.
    #[error("template {template:?}: {error}")]
    Template {
        /// The block as given.
        template: String,
        /// What is wrong with it.
        error: TemplateError,
    },
    /// A `whoami` zone that is no name.
    #[error("whoami zone {0:?} is no domain name")]
    Zone(String),
}

/// What `chaos` answers in class CH (CoreDNS `chaos VERSION AUTHORS...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chaos {
    /// The TXT of `version.bind.` and `version.server.`.
    pub version: String,
    /// The TXT records of `authors.bind.`, one per author.
    pub authors: Vec<String>,
    /// The TXT of `hostname.bind.` and `id.server.`.
    pub hostname: String,
}

/// The plugins as configured, each list in CoreDNS's own syntax: what the settings hand the
/// data plane, and what [`Plugins`] compare by.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginsConfig {
    /// `rewrite` rules, applied in order.
    pub rewrite: Vec<String>,
    /// `template` blocks, tried in order.
    pub templates: Vec<String>,
    /// Zones `whoami` answers.
    pub whoami: Vec<String>,
    /// CHAOS identity; `None` leaves class CH REFUSED.
    pub chaos: Option<Chaos>,
    /// `any`: every ANY question, in the zones or outside them, gets CoreDNS's RFC 8482 HINFO
    /// (`ANY obsoleted`, `See RFC 8482`) instead of the zones' or the upstream's answer.
    pub any: bool,
}

impl PluginsConfig {
    /// Whether no plugin is configured: the answer path is then left as it is.
    pub fn is_empty(&self) -> bool {
        self.rewrite.is_empty()
            && self.templates.is_empty()
            && self.whoami.is_empty()
            && self.chaos.is_none()
            && !self.any
    }
}

/// The plugins compiled: rules parsed, regexes built, zones made absolute.
#[derive(Debug)]
pub struct Plugins {
    config: PluginsConfig,
    rules: Vec<Rule>,
    templates: Vec<Template>,
    whoami: Vec<String>,
}

impl PartialEq for Plugins {
    fn eq(&self, other: &Plugins) -> bool {
        self.config == other.config
    }
}

impl Eq for Plugins {}

/// Rules applied to one question at most; further matching `continue` rules still rewrite it,
/// but their answer rules are not undone.
const MAX_FIRED: usize = 16;

impl Plugins {
    /// Parses and compiles `config`; every rule must parse.
    pub fn new(config: PluginsConfig) -> Result<Plugins, PluginError> {
        let rules = config
            .rewrite
            .iter()
            .map(|rule| {
                Rule::parse(rule).map_err(|error| PluginError::Rewrite {
                    rule: rule.clone(),
                    error,
                })
            })
            .collect::<Result<_, _>>()?;
        let templates = config
            .templates
            .iter()
            .map(|template| {
                Template::parse(template).map_err(|error| PluginError::Template {
                    template: template.clone(),
                    error,
                })
            })
            .collect::<Result<_, _>>()?;
        let whoami = config
            .whoami
            .iter()
            .map(|zone| {
                let mut wire = [0u8; MAX_NAME_LEN];
                text::wire_of(zone, &mut wire)
                    .map(|_| absolute(zone))
                    .ok_or_else(|| PluginError::Zone(zone.clone()))
            })
            .collect::<Result<_, _>>()?;
        Ok(Plugins {
            config,
            rules,
            templates,
            whoami,
        })
    }

    /// The configuration these were compiled from.
    pub fn config(&self) -> &PluginsConfig {
        &self.config
    }

    /// What `chaos` answers, when configured.
    pub(crate) fn chaos(&self) -> Option<&Chaos> {
        self.config.chaos.as_ref()
    }

    /// Runs the plugins ahead of answering `query`, asked by `client` over `transport`: a
    /// question a rule rewrites comes back [`Plan::Rewrite`], to be answered and restored; one a
    /// template, `whoami` or `any` answers comes back with the answer [`Made`] for it, which
    /// the answer path writes with its message builder.
    pub(crate) fn plan(&self, query: &[u8], client: &Peer, transport: Transport) -> Plan<'_> {
        let mut qname = LowerName::default();
        let mut q = Query::default();
        if parse_query_into(query, &mut qname, &mut q).is_err() {
            return Plan::Pass;
        }
        let Some(question) = q
            .question
            .filter(|_| q.qdcount == 1 && q.opcode() == 0 && q.error.is_none())
        else {
            return Plan::Pass;
        };
        if self.config.any && question.qtype == rtype::ANY {
            return Plan::Answer(any());
        }
        let Some(asked) = Text::of_wire(qname.wire()) else {
            return Plan::Pass;
        };
        let mut name = asked.clone();
        let (mut qtype, mut qclass) = (question.qtype, question.qclass);
        let mut fired = [0u16; MAX_FIRED];
        let mut count = 0;
        for (i, rule) in self.rules.iter().enumerate() {
            if rule.apply(&mut name, &mut qtype, &mut qclass) {
                if count < MAX_FIRED {
                    fired[count] = i as u16;
                    count += 1;
                }
                if rule.then == Then::Stop {
                    break;
                }
            }
        }
        let mut wire = [0u8; MAX_NAME_LEN];
        let wire_len = match name.to_wire(&mut wire) {
            Some(len) if count > 0 => len,
            // No rule matched, or the rules made no name of it: the question stays as asked.
            _ => {
                return match self.synthesize(asked.as_str(), (question.qtype, question.qclass), client, transport) {
                    Some(made) => Plan::Answer(made),
                    None => Plan::Pass,
                }
            }
        };
        let rest = &query[question.end..];
        let mut rewritten = Buffer::new(HEADER_LEN + wire_len + 4 + rest.len());
        let bytes = rewritten.bytes_mut();
        bytes[..HEADER_LEN].copy_from_slice(&query[..HEADER_LEN]);
        let mut pos = HEADER_LEN;
        for part in [&wire[..wire_len], &qtype.to_be_bytes(), &qclass.to_be_bytes(), rest] {
            bytes[pos..pos + part.len()].copy_from_slice(part);
            pos += part.len();
        }
        let spelled = &query[HEADER_LEN..question.end];
        let mut client_question = [0u8; MAX_NAME_LEN + 4];
        let question_len = if spelled.len() == qname.wire().len() + 4 {
            client_question[..spelled.len()].copy_from_slice(spelled);
            spelled.len()
        } else {
            let len = qname.wire().len();
            client_question[..len].copy_from_slice(qname.wire());
            client_question[len..len + 4].copy_from_slice(&query[question.end - 4..question.end]);
            len + 4
        };
        let mut client_name = [0u8; MAX_NAME_LEN];
        client_name[..qname.wire().len()].copy_from_slice(qname.wire());
        let restore = Rewritten {
            plugins: self,
            query: rewritten,
            question: client_question,
            question_len,
            qname: client_name,
            qname_len: qname.wire().len(),
            fired,
            fired_len: count,
            limit: size_limit(transport, q.edns),
            tcp: transport == Transport::Tcp,
        };
        let mut new_name = LowerName::default();
        let mut new_q = Query::default();
        if parse_query_into(restore.query(), &mut new_name, &mut new_q).is_err() {
            return Plan::Pass;
        }
        let made = self.synthesize(name.as_str(), (qtype, qclass), client, transport);
        Plan::Rewrite(restore, made)
    }

    /// The answer of a template or `whoami` to a question (`name` its dotted form) `client`
    /// asked over `transport`; `None` when none answers it.
    fn synthesize(&self, name: &str, (qtype, qclass): (u16, u16), client: &Peer, transport: Transport) -> Option<Made> {
        for template in &self.templates {
            let (code, sections) = match template.judge(name, qtype, qclass) {
                Verdict::Pass => continue,
                Verdict::NxDomain => (rcode::NXDOMAIN, Default::default()),
                Verdict::Answer(template, captures, zone) => {
                    let facts = Facts {
                        name,
                        zone,
                        qtype,
                        qclass,
                        remote: client.ip(),
                        captures: captures.as_ref(),
                    };
                    match template.records(&facts) {
                        Ok(sections) => (template.rcode, sections),
                        Err(error) => {
                            tracing::debug!(%error, "template made no record");
                            (rcode::SERVFAIL, Default::default())
                        }
                    }
                }
            };
            return Some(Made::Records(code, sections));
        }
        if self.whoami.iter().any(|zone| within(name, zone)) {
            return Some(whoami(client, transport));
        }
        None
    }
}

/// What [`Plugins::plan`] made of a query. The rewritten query stays on the stack: boxing it
/// would allocate per rewritten question.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Plan<'p> {
    /// Nothing: answer the query as it is.
    Pass,
    /// A plugin answers the client's question with this.
    Answer(Made),
    /// A rule rewrote it: answer [`Rewritten::query`] (with the answer made for it, when a
    /// template or `whoami` answers the rewritten question), then [`Rewritten::restore`] the
    /// reply.
    Rewrite(Rewritten<'p>, Option<Made>),
}

/// The length of `any`'s HINFO record.
const HINFO_LEN: usize = 12 + 2 + ANY_CPU.len() + ANY_OS.len();
/// `any`'s HINFO CPU string.
const ANY_CPU: &[u8] = b"ANY obsoleted";
/// `any`'s HINFO OS string.
const ANY_OS: &[u8] = b"See RFC 8482";

/// An answer a plugin makes, which the answer path writes after the question with its one
/// message builder, so that the header, EDNS and cookies of a plugin's reply are any reply's.
#[derive(Debug)]
pub(crate) enum Made {
    /// `any`'s answer to an ANY question (RFC 8482 §4.2), as CoreDNS writes it: one HINFO
    /// record at the query name, TTL 8482, the answer section of a reply without AA.
    Hinfo([u8; HINFO_LEN]),
    /// A template's or `whoami`'s: an authoritative reply with this rcode and the records of the
    /// answer, authority and additional sections, each with its count.
    Records(u16, [(Vec<u8>, u16); 3]),
}

/// Room for a rewritten query on the stack; a longer one (many EDNS options) goes to the heap.
const QUERY_ROOM: usize = 1024;

#[allow(clippy::large_enum_variant)]
enum Buffer {
    Stack([u8; QUERY_ROOM], usize),
    Heap(Vec<u8>),
}

impl Buffer {
    fn new(len: usize) -> Buffer {
        if len <= QUERY_ROOM {
            Buffer::Stack([0; QUERY_ROOM], len)
        } else {
            Buffer::Heap(vec![0; len])
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Buffer::Stack(bytes, len) => &bytes[..*len],
            Buffer::Heap(bytes) => bytes,
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Buffer::Stack(bytes, len) => &mut bytes[..*len],
            Buffer::Heap(bytes) => bytes,
        }
    }
}

/// A rewritten query, with what turning its reply back needs: the client's question, and the
/// rules that rewrote it.
pub(crate) struct Rewritten<'p> {
    plugins: &'p Plugins,
    query: Buffer,
    question: [u8; MAX_NAME_LEN + 4],
    question_len: usize,
    qname: [u8; MAX_NAME_LEN],
    qname_len: usize,
    fired: [u16; MAX_FIRED],
    fired_len: usize,
    limit: usize,
    tcp: bool,
}

/// Replies up to this size are turned back from a copy on the stack: every UDP reply.
const SMALL_REPLY: usize = 1536;

impl Rewritten<'_> {
    /// The rewritten query, to be answered in the client's place.
    pub(crate) fn query(&self) -> &[u8] {
        self.query.bytes()
    }

    /// Turns the reply in `out` to the rewritten query into the client's, in place: its own
    /// question, and the owner names of the answer section turned back by `answer auto` and
    /// `answer name`, the last rule applied first.
    pub(crate) fn restore(&self, outcome: Outcome, out: &mut [u8]) -> Outcome {
        let Outcome::Reply(reply) = outcome else {
            return outcome;
        };
        let mut small = [0u8; SMALL_REPLY];
        let heap;
        let written = &out[..reply.len().min(out.len())];
        let source: &[u8] = if written.len() <= SMALL_REPLY {
            small[..written.len()].copy_from_slice(written);
            &small[..written.len()]
        } else {
            heap = written.to_vec();
            &heap
        };
        let client = back::Client {
            question: &self.question[..self.question_len],
            qname: &self.qname[..self.qname_len],
            limit: self.limit,
            tcp: self.tcp,
        };
        let rules = &self.plugins.rules;
        let fired = &self.fired[..self.fired_len];
        let restored = back::restore(source, out, &client, |owner| {
            fired
                .iter()
                .rev()
                .fold(false, |changed, &i| rules[usize::from(i)].revert(owner) | changed)
        });
        let rcode = if restored.rcode == reply.rcode() & 0x000F {
            reply.rcode()
        } else {
            restored.rcode
        };
        let notes = (reply.notes() & !note::TRUNCATED) | note::when(restored.truncated, note::TRUNCATED);
        let question = &self.question[..self.question_len];
        let qtype = question
            .len()
            .checked_sub(4)
            .map_or(0, |at| u16::from_be_bytes([question[at], question[at + 1]]));
        Outcome::Reply(Reply::new(
            restored.len,
            rcode,
            (HEADER_LEN + self.question_len) as u16,
            qtype,
            notes,
        ))
    }
}

/// `any`'s answer to an ANY question: the HINFO `ANY obsoleted` / `See RFC 8482`.
fn any() -> Made {
    let mut record = [0u8; HINFO_LEN];
    record[..2].copy_from_slice(&[0xC0, HEADER_LEN as u8]);
    record[2..4].copy_from_slice(&rtype::HINFO.to_be_bytes());
    record[4..6].copy_from_slice(&class::IN.to_be_bytes());
    record[6..10].copy_from_slice(&8482u32.to_be_bytes());
    record[10..12].copy_from_slice(&((2 + ANY_CPU.len() + ANY_OS.len()) as u16).to_be_bytes());
    record[12] = ANY_CPU.len() as u8;
    record[13..13 + ANY_CPU.len()].copy_from_slice(ANY_CPU);
    record[13 + ANY_CPU.len()] = ANY_OS.len() as u8;
    record[14 + ANY_CPU.len()..].copy_from_slice(ANY_OS);
    Made::Hinfo(record)
}

/// `whoami`'s answer, as CoreDNS writes it: in the additional section, the client's address
/// (A or AAAA) at the query name, and an SRV record at `_udp.` or `_tcp.` and the query name
/// whose port is the client's, TTL 0.
fn whoami(client: &Peer, transport: Transport) -> Made {
    let client = client.addr();
    let mut records = Vec::with_capacity(64);
    let at_query = [0xC0, HEADER_LEN as u8];
    records.extend_from_slice(&at_query);
    match client.ip() {
        std::net::IpAddr::V4(a) => {
            records.extend_from_slice(&rtype::A.to_be_bytes());
            records.extend_from_slice(&class::IN.to_be_bytes());
            records.extend_from_slice(&[0, 0, 0, 0, 0, 4]);
            records.extend_from_slice(&a.octets());
        }
        std::net::IpAddr::V6(a) => {
            records.extend_from_slice(&rtype::AAAA.to_be_bytes());
            records.extend_from_slice(&class::IN.to_be_bytes());
            records.extend_from_slice(&[0, 0, 0, 0, 0, 16]);
            records.extend_from_slice(&a.octets());
        }
    }
    let label: &[u8] = match transport {
        Transport::Udp => b"\x04_udp",
        Transport::Tcp => b"\x04_tcp",
    };
    records.extend_from_slice(label);
    records.extend_from_slice(&at_query);
    records.extend_from_slice(&rtype::SRV.to_be_bytes());
    records.extend_from_slice(&class::IN.to_be_bytes());
    records.extend_from_slice(&[0, 0, 0, 0, 0, 7, 0, 0, 0, 0]);
    records.extend_from_slice(&client.port().to_be_bytes());
    records.push(0);
    Made::Records(rcode::NOERROR, [(Vec::new(), 0), (Vec::new(), 0), (records, 2)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::plugins::{before, Before};
    use crate::answer::Context;
    use hickory_proto::op::{Message, MessageType, Query as HQuery, ResponseCode};
    use hickory_proto::rr::{DNSClass, Name, RData, RecordType};
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};

    fn query(name: &str, rtype_: RecordType) -> Vec<u8> {
        let mut m = Message::new();
        m.set_id(7)
            .set_message_type(MessageType::Query)
            .set_recursion_desired(true);
        m.add_query(HQuery::query(Name::from_ascii(name).unwrap(), rtype_));
        m.to_vec().unwrap()
    }

    fn plugins(config: PluginsConfig) -> Plugins {
        Plugins::new(config).unwrap()
    }

    #[test]
    fn nothing_matching_passes_the_query_through() {
        let p = plugins(PluginsConfig {
            rewrite: vec!["name exact a.example. b.example.".into()],
            ..Default::default()
        });
        let mut out = [0u8; 512];
        let ctx = Context::new(Transport::Udp);
        assert!(matches!(
            before(&p, &query("c.example.", RecordType::A), &ctx, &mut out),
            Before::Pass
        ));
    }

    #[test]
    fn a_rewritten_query_asks_the_target_name_and_type() {
        let p = plugins(PluginsConfig {
            rewrite: vec![
                "continue name suffix .old.example. .new.example.".into(),
                "type AAAA A".into(),
                "name exact never.example. reached.example.".into(),
            ],
            ..Default::default()
        });
        let mut out = [0u8; 512];
        let ctx = Context::new(Transport::Udp);
        let Before::Rewritten(rw) = before(&p, &query("Host.old.example.", RecordType::AAAA), &ctx, &mut out) else {
            panic!("not rewritten");
        };
        let asked = Message::from_vec(rw.query()).unwrap();
        assert_eq!(asked.id(), 7);
        assert_eq!(asked.queries()[0].name().to_ascii(), "host.new.example.");
        assert_eq!(asked.queries()[0].query_type(), RecordType::A);
    }

    #[test]
    fn a_restored_reply_reports_the_clients_question_and_type() {
        let p = plugins(PluginsConfig {
            rewrite: vec!["type AAAA A".into(), "name exact host.example. other.example.".into()],
            ..Default::default()
        });
        let mut out = [0u8; 512];
        let ctx = Context::new(Transport::Udp);
        let client = query("host.example.", RecordType::AAAA);
        let Before::Rewritten(rw) = before(&p, &client, &ctx, &mut out) else {
            panic!("not rewritten");
        };
        let snapshot = crate::snapshot::Snapshot::default();
        let answered = crate::answer::answer(rw.query(), &snapshot, &ctx, &mut out);
        let Outcome::Reply(asked) = answered else {
            panic!("no reply to the rewritten query");
        };
        assert_eq!(asked.qtype(), rtype::A);
        let Outcome::Reply(restored) = rw.restore(answered, &mut out) else {
            panic!("no restored reply");
        };
        assert_eq!(restored.qtype(), rtype::AAAA);
        assert_eq!(usize::from(restored.question_end()), client.len());
        let reply = Message::from_vec(&out[..restored.len()]).unwrap();
        assert_eq!(reply.queries()[0].query_type(), RecordType::AAAA);
        assert_eq!(reply.queries()[0].name().to_ascii(), "host.example.");
    }

    #[test]
    fn stop_ends_at_the_first_matching_rule() {
        let p = plugins(PluginsConfig {
            rewrite: vec![
                "name suffix .a.example. .b.example.".into(),
                "name suffix .b.example. .c.example.".into(),
            ],
            ..Default::default()
        });
        let mut out = [0u8; 512];
        let ctx = Context::new(Transport::Udp);
        let Before::Rewritten(rw) = before(&p, &query("x.a.example.", RecordType::A), &ctx, &mut out) else {
            panic!("not rewritten");
        };
        assert_eq!(
            Message::from_vec(rw.query()).unwrap().queries()[0].name().to_ascii(),
            "x.b.example."
        );
    }

    #[test]
    fn a_template_without_records_denies_matching_names() {
        let p = plugins(PluginsConfig {
            templates: vec![r"ANY ANY local { match .*\.local\.$; rcode NXDOMAIN }".into()],
            ..Default::default()
        });
        let mut out = [0u8; 512];
        let ctx = Context::new(Transport::Udp);
        let Before::Answered(Outcome::Reply(reply)) =
            before(&p, &query("printer.local.", RecordType::A), &ctx, &mut out)
        else {
            panic!("not answered");
        };
        let m = Message::from_vec(&out[..reply.len()]).unwrap();
        assert_eq!(m.response_code(), ResponseCode::NXDomain);
        assert!(m.authoritative());
        assert_eq!(m.queries()[0].name().to_ascii(), "printer.local.");
    }

    #[test]
    fn whoami_answers_the_clients_address_and_port() {
        let p = plugins(PluginsConfig {
            whoami: vec!["whoami.example".into()],
            ..Default::default()
        });
        let mut out = [0u8; 512];
        let mut ctx = Context::new(Transport::Tcp);
        ctx.client = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)), 5353).into();
        let Before::Answered(Outcome::Reply(reply)) =
            before(&p, &query("whoami.example.", RecordType::A), &ctx, &mut out)
        else {
            panic!("not answered");
        };
        let m = Message::from_vec(&out[..reply.len()]).unwrap();
        assert!(m.answers().is_empty());
        let extra = m.additionals();
        assert_eq!(extra[0].data(), Some(&RData::A(Ipv4Addr::new(192, 0, 2, 7).into())));
        assert_eq!(extra[1].name().to_ascii(), "_tcp.whoami.example.");
        let Some(RData::SRV(srv)) = extra[1].data() else {
            panic!("no SRV");
        };
        assert_eq!(srv.port(), 5353);
        assert_eq!(extra[1].dns_class(), DNSClass::IN);
    }

    #[test]
    fn any_answers_every_any_question_with_the_rfc_8482_hinfo() {
        let p = plugins(PluginsConfig {
            any: true,
            ..Default::default()
        });
        let mut out = [0u8; 512];
        let ctx = Context::new(Transport::Udp);
        let Before::Answered(Outcome::Reply(reply)) =
            before(&p, &query("outside.example.", RecordType::ANY), &ctx, &mut out)
        else {
            panic!("not answered");
        };
        let m = Message::from_vec(&out[..reply.len()]).unwrap();
        let Some(RData::HINFO(hinfo)) = m.answers()[0].data() else {
            panic!("no HINFO: {m:?}");
        };
        assert_eq!((hinfo.cpu(), hinfo.os()), (&b"ANY obsoleted"[..], &b"See RFC 8482"[..]));
        assert_eq!(m.answers()[0].ttl(), 8482);
        assert!(matches!(
            before(&p, &query("outside.example.", RecordType::A), &ctx, &mut out),
            Before::Pass
        ));
    }

    #[test]
    fn configuration_errors_name_the_rule() {
        let error = Plugins::new(PluginsConfig {
            rewrite: vec!["name regex ( x".into()],
            ..Default::default()
        })
        .unwrap_err();
        assert!(matches!(error, PluginError::Rewrite { ref rule, .. } if rule == "name regex ( x"));
        assert!(matches!(
            Plugins::new(PluginsConfig {
                whoami: vec!["a..b".into()],
                ..Default::default()
            }),
            Err(PluginError::Zone(_))
        ));
    }
}
