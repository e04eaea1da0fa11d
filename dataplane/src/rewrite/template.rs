//! One `template` block in CoreDNS's syntax (plugin/template/README.md of CoreDNS):
//!
//! ```text
//! CLASS TYPE [ZONE...] { match REGEX...; answer RR; additional RR; authority RR; rcode CODE; fallthrough [ZONE...] }
//! ```
//!
//! (statements end at `;` or a line break), parsed once into typed matchers and record
//! templates. A record template is text with Go template actions CoreDNS's templates use:
//! `{{ .Name }}`, `{{ .Zone }}`, `{{ .Type }}`, `{{ .Class }}`, `{{ .Remote }}`,
//! `{{ index .Match N }}`, `{{ .Group.N }}`, `{{ .Group.NAME }}` and `{{ index .Group "NAME" }}`;
//! it is filled in and read as a zone-file record per answer.

use super::text::{absolute, class_name, class_of, rcode_of, rtype_name, rtype_of, wire_of, within};
use super::TemplateError;
use crate::wire::types::{class, rcode, rtype, MAX_NAME_LEN};
use regex::{Captures, Regex};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What a template makes of a question.
pub(crate) enum Verdict<'t> {
    /// Not the template's question: the next template, then the rest of answering.
    Pass,
    /// A question of its zones, class and type that no regex matches, without fallthrough:
    /// NXDOMAIN, as CoreDNS answers it.
    NxDomain,
    /// Answer with the template: its regex's match of the name.
    Answer(&'t Template, Option<Captures<'t>>, &'t str),
}

/// A record template: literal text and the actions filled in per answer.
#[derive(Debug)]
struct RecordTemplate(Vec<Piece>);

#[derive(Debug)]
enum Piece {
    Text(String),
    Name,
    Zone,
    Type,
    Class,
    Remote,
    Group(String),
}

/// One template block, compiled.
#[derive(Debug)]
pub(crate) struct Template {
    class: u16,
    qtype: u16,
    zones: Vec<String>,
    regexes: Vec<Regex>,
    answer: Vec<RecordTemplate>,
    authority: Vec<RecordTemplate>,
    additional: Vec<RecordTemplate>,
    pub(crate) rcode: u16,
    /// `None`: no fallthrough; empty: every zone.
    fallthrough: Option<Vec<String>>,
}

/// The facts of one question a record template is filled with.
pub(crate) struct Facts<'a> {
    pub(crate) name: &'a str,
    pub(crate) zone: &'a str,
    pub(crate) qtype: u16,
    pub(crate) qclass: u16,
    pub(crate) remote: IpAddr,
    pub(crate) captures: Option<&'a Captures<'a>>,
}

impl Template {
    /// Parses a template block as a Corefile spells it after the plugin's name.
    pub(crate) fn parse(text: &str) -> Result<Template, TemplateError> {
        let (head, body) = match text.find('{') {
            Some(open) => {
                let close = text
                    .rfind('}')
                    .filter(|&c| c > open)
                    .ok_or(TemplateError::Form("no closing }"))?;
                if !text[close + 1..].trim().is_empty() {
                    return Err(TemplateError::Form("text after the closing }"));
                }
                (&text[..open], &text[open + 1..close])
            }
            None => (text, ""),
        };
        let head: Vec<&str> = head.split_whitespace().collect();
        let [qclass, qtype, zones @ ..] = head.as_slice() else {
            return Err(TemplateError::Form("a template starts with CLASS TYPE"));
        };
        let mut template = Template {
            class: class_of(qclass).ok_or(TemplateError::Class((*qclass).to_owned()))?,
            qtype: rtype_of(qtype).ok_or(TemplateError::Type((*qtype).to_owned()))?,
            zones: if zones.is_empty() {
                vec![".".to_owned()]
            } else {
                zones.iter().map(|z| absolute(z)).collect()
            },
            regexes: Vec::new(),
            answer: Vec::new(),
            authority: Vec::new(),
            additional: Vec::new(),
            rcode: rcode::NOERROR,
            fallthrough: None,
        };
        for statement in body.split([';', '\n']) {
            let words = words(statement)?;
            let Some((keyword, args)) = words.split_first() else {
                continue;
            };
            match (keyword.as_str(), args) {
                ("match", [_, ..]) => {
                    for regex in args {
                        template
                            .regexes
                            .push(Regex::new(regex).map_err(|e| TemplateError::Regex {
                                regex: regex.clone(),
                                reason: e.to_string(),
                            })?);
                    }
                }
                ("answer", [record]) => template.answer.push(RecordTemplate::parse(record)?),
                ("authority", [record]) => template.authority.push(RecordTemplate::parse(record)?),
                ("additional", [record]) => template.additional.push(RecordTemplate::parse(record)?),
                ("rcode", [code]) => template.rcode = rcode_of(code).ok_or(TemplateError::Rcode(code.clone()))?,
                ("fallthrough", zones) => template.fallthrough = Some(zones.iter().map(|z| absolute(z)).collect()),
                (keyword, _) => return Err(TemplateError::Statement(keyword.to_owned())),
            }
        }
        if template.regexes.is_empty() {
            template
                .regexes
                .push(Regex::new(".*").map_err(|e| TemplateError::Regex {
                    regex: ".*".to_owned(),
                    reason: e.to_string(),
                })?);
        }
        Ok(template)
    }

    /// What the template makes of the question `name` (dotted, lower-cased) of `qtype` and
    /// `qclass`, as CoreDNS's `template.match` decides: zone, class and type first (ANY on
    /// either side matches), then the first regex that matches.
    pub(crate) fn judge<'t>(&'t self, name: &'t str, qtype: u16, qclass: u16) -> Verdict<'t> {
        let Some(zone) = self.zones.iter().filter(|z| within(name, z)).max_by_key(|z| z.len()) else {
            return Verdict::Pass;
        };
        if self.class != 255 && qclass != 255 && qclass != self.class {
            return Verdict::Pass;
        }
        if self.qtype != rtype::ANY && qtype != rtype::ANY && qtype != self.qtype {
            return Verdict::Pass;
        }
        let wants_groups = self.answer.len() + self.authority.len() + self.additional.len() > 0;
        for regex in &self.regexes {
            if !regex.is_match(name) {
                continue;
            }
            // Only a template that writes records reads the groups: a blocking one allocates nothing.
            let captures = if wants_groups { regex.captures(name) } else { None };
            return Verdict::Answer(self, captures, zone);
        }
        match &self.fallthrough {
            Some(zones) if zones.is_empty() || zones.iter().any(|z| within(name, z)) => Verdict::Pass,
            _ => Verdict::NxDomain,
        }
    }

    /// The records of the answer, authority and additional sections in wire form (owner names
    /// uncompressed), each with its count; an error when a filled-in record is no record.
    pub(crate) fn records(&self, facts: &Facts<'_>) -> Result<[(Vec<u8>, u16); 3], TemplateError> {
        let mut sections: [(Vec<u8>, u16); 3] = Default::default();
        for (section, templates) in [&self.answer, &self.authority, &self.additional]
            .into_iter()
            .enumerate()
        {
            for template in templates {
                let text = template.fill(facts);
                record(&text, &mut sections[section].0)?;
                sections[section].1 += 1;
            }
        }
        Ok(sections)
    }
}

impl RecordTemplate {
    fn parse(text: &str) -> Result<RecordTemplate, TemplateError> {
        let mut pieces = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                pieces.push(Piece::Text(rest[..open].to_owned()));
            }
            let close = rest[open..]
                .find("}}")
                .ok_or(TemplateError::Form("an action without }}"))?
                + open;
            let action = rest[open + 2..close].trim_matches(|c: char| c == '-' || c.is_whitespace());
            pieces.push(action_of(action)?);
            rest = &rest[close + 2..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Text(rest.to_owned()));
        }
        Ok(RecordTemplate(pieces))
    }

    fn fill(&self, facts: &Facts<'_>) -> String {
        let mut out = String::new();
        for piece in &self.0 {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Name => out.push_str(facts.name),
                Piece::Zone => out.push_str(facts.zone),
                Piece::Type => out.push_str(&rtype_name(facts.qtype)),
                Piece::Class => out.push_str(&class_name(facts.qclass)),
                Piece::Remote => out.push_str(&facts.remote.to_string()),
                Piece::Group(group) => {
                    let captures = facts.captures;
                    let found = match group.parse::<usize>() {
                        Ok(n) => captures.and_then(|c| c.get(n)),
                        Err(_) => captures.and_then(|c| c.name(group)),
                    };
                    out.push_str(found.map_or("", |m| m.as_str()));
                }
            }
        }
        out
    }
}

fn action_of(action: &str) -> Result<Piece, TemplateError> {
    let words: Vec<&str> = action.split_whitespace().collect();
    Ok(match words.as_slice() {
        [".Name"] => Piece::Name,
        [".Zone"] => Piece::Zone,
        [".Type"] => Piece::Type,
        [".Class"] => Piece::Class,
        [".Remote"] => Piece::Remote,
        ["index", ".Match", n] if n.parse::<usize>().is_ok() => Piece::Group((*n).to_owned()),
        ["index", ".Group", key] => Piece::Group(key.trim_matches('"').to_owned()),
        [field] if field.starts_with(".Group.") => Piece::Group(field[".Group.".len()..].to_owned()),
        _ => return Err(TemplateError::Action(action.to_owned())),
    })
}

/// The words of a statement: whitespace-separated, a double-quoted string one word (`\"` a
/// quote inside it; other backslashes stay, as a regex needs them).
fn words(statement: &str) -> Result<Vec<String>, TemplateError> {
    let mut words = Vec::new();
    let mut chars = statement.trim().chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut word = String::new();
        if c == '"' {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') if chars.peek() == Some(&'"') => word.push(chars.next().unwrap_or('"')),
                    Some(c) => word.push(c),
                    None => return Err(TemplateError::Form("an unclosed string")),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                word.push(c);
                chars.next();
            }
        }
        words.push(word);
    }
    Ok(words)
}

/// Reads `text`, a zone-file record (`NAME [TTL] [CLASS] TYPE RDATA`, TTL and class in either
/// order), and appends its wire form to `out`.
pub(crate) fn record(text: &str, out: &mut Vec<u8>) -> Result<(), TemplateError> {
    let bad = || TemplateError::Record(text.to_owned());
    let tokens = words(text)?;
    let mut tokens = tokens.iter().map(String::as_str);
    let owner = tokens.next().ok_or_else(bad)?;
    let mut ttl = 3600u32;
    let mut rclass = class::IN;
    let qtype = loop {
        let token = tokens.next().ok_or_else(bad)?;
        if let Ok(value) = token.parse::<u32>() {
            ttl = value;
        } else if let Some(value) = class_of(token).filter(|_| !token.eq_ignore_ascii_case("ANY")) {
            rclass = value;
        } else {
            break rtype_of(token).ok_or_else(bad)?;
        }
    };
    let rdata: Vec<&str> = tokens.collect();
    put_name(owner, out).ok_or_else(bad)?;
    out.extend_from_slice(&qtype.to_be_bytes());
    out.extend_from_slice(&rclass.to_be_bytes());
    out.extend_from_slice(&ttl.to_be_bytes());
    let length_at = out.len();
    out.extend_from_slice(&[0, 0]);
    let number = |s: &str| s.parse::<u16>().ok();
    let written = match (qtype, rdata.as_slice()) {
        (rtype::A, [address]) => address
            .parse::<Ipv4Addr>()
            .ok()
            .map(|a| out.extend_from_slice(&a.octets())),
        (rtype::AAAA, [address]) => address
            .parse::<Ipv6Addr>()
            .ok()
            .map(|a| out.extend_from_slice(&a.octets())),
        (rtype::CNAME | rtype::NS | rtype::PTR, [target]) => put_name(target, out),
        (rtype::MX, [preference, exchange]) => number(preference).and_then(|p| {
            out.extend_from_slice(&p.to_be_bytes());
            put_name(exchange, out)
        }),
        (rtype::SRV, [priority, weight, port, target]) => [priority, weight, port]
            .iter()
            .map(|n| number(n))
            .collect::<Option<Vec<u16>>>()
            .and_then(|numbers| {
                numbers.iter().for_each(|n| out.extend_from_slice(&n.to_be_bytes()));
                put_name(target, out)
            }),
        (rtype::TXT, [_, ..]) => rdata
            .iter()
            .all(|s| {
                out.push(s.len().min(255) as u8);
                out.extend_from_slice(&s.as_bytes()[..s.len().min(255)]);
                true
            })
            .then_some(()),
        _ => None,
    };
    written.ok_or_else(bad)?;
    let length = u16::try_from(out.len() - length_at - 2).map_err(|_| bad())?;
    out[length_at..length_at + 2].copy_from_slice(&length.to_be_bytes());
    Ok(())
}

fn put_name(text: &str, out: &mut Vec<u8>) -> Option<()> {
    let mut wire = [0u8; MAX_NAME_LEN];
    let len = wire_of(text, &mut wire)?;
    out.extend_from_slice(&wire[..len]);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(name: &'a str, captures: Option<&'a Captures<'a>>) -> Facts<'a> {
        Facts {
            name,
            zone: "example.org.",
            qtype: rtype::A,
            qclass: class::IN,
            remote: IpAddr::V4(Ipv4Addr::LOCALHOST),
            captures,
        }
    }

    #[test]
    fn a_template_answers_names_its_regex_matches_in_its_zone() {
        let t = Template::parse(
            r#"IN A example.org { match ^(?P<host>[a-z]+)\.example\.org\.$; answer "{{ .Name }} 60 IN A 10.0.0.1" }"#,
        )
        .unwrap();
        assert!(matches!(
            t.judge("www.example.org.", rtype::A, class::IN),
            Verdict::Answer(..)
        ));
        assert!(matches!(
            t.judge("www.example.org.", rtype::ANY, class::IN),
            Verdict::Answer(..)
        ));
        assert!(matches!(
            t.judge("www.example.net.", rtype::A, class::IN),
            Verdict::Pass
        ));
        assert!(matches!(
            t.judge("www.example.org.", rtype::AAAA, class::IN),
            Verdict::Pass
        ));
        assert!(
            matches!(t.judge("a.b.example.org.", rtype::A, class::IN), Verdict::NxDomain),
            "in the zone, no regex matches, no fallthrough"
        );
    }

    #[test]
    fn fallthrough_passes_names_no_regex_matches() {
        let t = Template::parse("IN A example.org {\n match ^x\\.\n rcode NXDOMAIN\n fallthrough\n}").unwrap();
        assert!(matches!(t.judge("y.example.org.", rtype::A, class::IN), Verdict::Pass));
        assert_eq!(t.rcode, rcode::NXDOMAIN);
    }

    #[test]
    fn records_are_filled_with_the_question_and_groups() {
        let t = Template::parse(
            r#"ANY ANY { match "^ip-(?P<a>\d+)-(\d+)-(\d+)-(\d+)\.example\.org\.$"; answer "{{ .Name }} 5 IN A {{ .Group.a }}.{{ index .Match 2 }}.{{ .Group.3 }}.{{ index .Group \"4\" }}"; additional "{{ .Zone }} TXT \"{{ .Type }} {{ .Class }}\"" }"#,
        )
        .unwrap();
        let name = "ip-10-1-2-3.example.org.";
        let Verdict::Answer(t, captures, _) = t.judge(name, rtype::A, class::IN) else {
            panic!("no answer");
        };
        let [(answer, 1), (authority, 0), (additional, 1)] = t.records(&facts(name, captures.as_ref())).unwrap() else {
            panic!("wrong counts");
        };
        assert!(authority.is_empty());
        assert_eq!(&answer[answer.len() - 4..], &[10, 1, 2, 3]);
        assert_eq!(&answer[answer.len() - 10..answer.len() - 6], &5u32.to_be_bytes());
        assert!(additional.ends_with(b"\x04A IN"));
    }

    #[test]
    fn zone_file_records_of_every_supported_type_read() {
        for text in [
            "a.example. 60 IN A 192.0.2.1",
            "a.example. IN 60 AAAA 2001:db8::1",
            "a.example. CNAME b.example.",
            "a.example. 60 MX 10 mail.example.",
            "_x._tcp.example. SRV 0 5 53 ns.example.",
            "1.2.0.192.in-addr.arpa. PTR a.example.",
            "a.example. TXT \"hello world\" more",
        ] {
            let mut out = Vec::new();
            record(text, &mut out).unwrap_or_else(|e| panic!("{text}: {e}"));
        }
        let mut out = Vec::new();
        assert!(matches!(
            record("a.example. 60 IN A 10.0.0", &mut out),
            Err(TemplateError::Record(_))
        ));
    }

    #[test]
    fn malformed_templates_are_typed_errors() {
        assert!(matches!(Template::parse("IN"), Err(TemplateError::Form(_))));
        assert!(matches!(Template::parse("IN BOGUS"), Err(TemplateError::Type(_))));
        assert!(matches!(
            Template::parse("IN A { rcode BOGUS }"),
            Err(TemplateError::Rcode(_))
        ));
        assert!(matches!(
            Template::parse("IN A { upstream }"),
            Err(TemplateError::Statement(_))
        ));
        assert!(matches!(
            Template::parse("IN A { answer \"{{ .Message }}\" }"),
            Err(TemplateError::Action(_))
        ));
        assert!(matches!(
            Template::parse("IN A { match ( }"),
            Err(TemplateError::Regex { .. })
        ));
    }
}
