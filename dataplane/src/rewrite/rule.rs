//! One `rewrite` rule in CoreDNS's syntax (plugin/rewrite/README.md of CoreDNS):
//!
//! ```text
//! [continue|stop] name [exact|prefix|suffix|substring|regex] FROM TO [answer auto|answer name FROM TO]
//! [continue|stop] type FROM TO
//! [continue|stop] class FROM TO
//! ```
//!
//! parsed once, at configuration, into a typed rule whose regular expressions are compiled
//! then; applied to a question's name, type and class, and, for the answer, undone on the
//! owner names of the answer section.

use super::text::{absolute, class_of, rtype_of, Text};
use super::RuleError;
use regex::Regex;

/// What a matching rule does to the rules after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Then {
    /// The first matching rule is the last applied (CoreDNS's default).
    Stop,
    /// The next rules apply to the rewritten question too.
    Continue,
}

/// How a name rule finds the names it rewrites, with what it rewrites them to.
#[derive(Debug)]
enum NameMatch {
    /// The whole name, both absolute and lower-cased.
    Exact(String, String),
    /// The name's beginning.
    Prefix(String, String),
    /// The name's end, both absolute.
    Suffix(String, String),
    /// Every occurrence of a part of the name.
    Substring(String, String),
    /// A regular expression over the dotted name; `{N}` in the replacement is its group N.
    Regex(Regex, String),
}

/// How the owner names of the answer section are turned back.
#[derive(Debug)]
enum AnswerRule {
    /// The rule's own match, the other way round (exact, prefix, suffix, substring).
    Auto,
    /// `answer name REGEX REPLACEMENT`.
    Name(Regex, String),
}

/// What a rule rewrites.
#[derive(Debug)]
enum Field {
    Name(NameMatch, Option<AnswerRule>),
    Type(u16, u16),
    Class(u16, u16),
}

/// One rewrite rule, compiled.
#[derive(Debug)]
pub(crate) struct Rule {
    pub(crate) then: Then,
    field: Field,
}

impl Rule {
    /// Parses `text`, a rule as a Corefile's `rewrite` line spells it after the plugin's name.
    pub(crate) fn parse(text: &str) -> Result<Rule, RuleError> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let (then, rest) = match words.first() {
            Some(&"stop") => (Then::Stop, &words[1..]),
            Some(&"continue") => (Then::Continue, &words[1..]),
            _ => (Then::Stop, &words[..]),
        };
        let field = match rest {
            ["name", rest @ ..] => name_rule(rest)?,
            ["type", from, to] => Field::Type(
                rtype_of(from).ok_or(RuleError::Type((*from).to_owned()))?,
                rtype_of(to).ok_or(RuleError::Type((*to).to_owned()))?,
            ),
            ["class", from, to] => Field::Class(
                class_of(from).ok_or(RuleError::Class((*from).to_owned()))?,
                class_of(to).ok_or(RuleError::Class((*to).to_owned()))?,
            ),
            ["type" | "class", ..] => return Err(RuleError::Form("type and class rules take FROM TO")),
            [field, ..] => return Err(RuleError::Field((*field).to_owned())),
            [] => return Err(RuleError::Form("a rule names a field: name, type or class")),
        };
        Ok(Rule { then, field })
    }

    /// Rewrites the question (`name`, `qtype`, `qclass`) when the rule matches it; whether it
    /// did. A name the rule would make invalid (too long) is left as it was.
    pub(crate) fn apply(&self, name: &mut Text, qtype: &mut u16, qclass: &mut u16) -> bool {
        match &self.field {
            Field::Type(from, to) if *qtype == *from => {
                *qtype = *to;
                true
            }
            Field::Class(from, to) if *qclass == *from => {
                *qclass = *to;
                true
            }
            Field::Type(..) | Field::Class(..) => false,
            Field::Name(how, _) => match rewritten(how, name.as_str()) {
                Some(new) => {
                    *name = new;
                    true
                }
                None => false,
            },
        }
    }

    /// Turns an owner name of the answer section back, with `answer auto` or `answer name`;
    /// whether it changed.
    pub(crate) fn revert(&self, owner: &mut Text) -> bool {
        let Field::Name(how, Some(answer)) = &self.field else {
            return false;
        };
        let name = owner.as_str();
        let new = match (answer, how) {
            (AnswerRule::Name(regex, to), _) => by_regex(regex, to, name),
            (AnswerRule::Auto, NameMatch::Exact(from, to)) => (name == to).then(|| Text::of(from)).flatten(),
            (AnswerRule::Auto, NameMatch::Prefix(from, to)) => {
                name.strip_prefix(to.as_str()).and_then(|rest| joined(from, rest))
            }
            (AnswerRule::Auto, NameMatch::Suffix(from, to)) => {
                name.strip_suffix(to.as_str()).and_then(|rest| joined(rest, from))
            }
            (AnswerRule::Auto, NameMatch::Substring(from, to)) => replaced(name, to, from),
            (AnswerRule::Auto, NameMatch::Regex(..)) => None,
        };
        match new {
            Some(new) => {
                *owner = new;
                true
            }
            None => false,
        }
    }
}

fn name_rule(words: &[&str]) -> Result<Field, RuleError> {
    let (kind, rest) = match words.first() {
        Some(&kind @ ("exact" | "prefix" | "suffix" | "substring" | "regex")) => (kind, &words[1..]),
        _ => ("exact", words),
    };
    let (from, to, answer) = match rest {
        [from, to] => (*from, *to, None),
        [from, to, "answer", "auto"] => (*from, *to, Some(AnswerRule::Auto)),
        [from, to, "answer", "name", answer_from, answer_to] => (
            *from,
            *to,
            Some(AnswerRule::Name(regex(answer_from)?, (*answer_to).to_owned())),
        ),
        [_, _, "answer", "value", ..] => return Err(RuleError::Form("answer value is not supported")),
        _ => {
            return Err(RuleError::Form(
                "a name rule is [MATCH] FROM TO [answer auto|answer name FROM TO]",
            ))
        }
    };
    let how = match kind {
        "exact" => NameMatch::Exact(absolute(from), absolute(to)),
        "prefix" => NameMatch::Prefix(from.to_ascii_lowercase(), to.to_ascii_lowercase()),
        "suffix" => NameMatch::Suffix(absolute(from), absolute(to)),
        "substring" => NameMatch::Substring(from.to_ascii_lowercase(), to.to_ascii_lowercase()),
        _ => NameMatch::Regex(regex(from)?, to.to_owned()),
    };
    if matches!((&how, &answer), (NameMatch::Regex(..), Some(AnswerRule::Auto))) {
        return Err(RuleError::Form(
            "a regex rule turns answers back with answer name REGEX TO",
        ));
    }
    if matches!(&how, NameMatch::Substring(from, _) | NameMatch::Prefix(from, _) if from.is_empty()) {
        return Err(RuleError::Form("an empty name to match"));
    }
    Ok(Field::Name(how, answer))
}

fn regex(text: &str) -> Result<Regex, RuleError> {
    Regex::new(text).map_err(|e| RuleError::Regex {
        regex: text.to_owned(),
        reason: e.to_string(),
    })
}

/// What `how` makes of `name`, `None` when it does not match or the result does not fit.
fn rewritten(how: &NameMatch, name: &str) -> Option<Text> {
    match how {
        NameMatch::Exact(from, to) => (name == from).then(|| Text::of(to)).flatten(),
        NameMatch::Prefix(from, to) => name.strip_prefix(from.as_str()).and_then(|rest| joined(to, rest)),
        NameMatch::Suffix(from, to) => name.strip_suffix(from.as_str()).and_then(|rest| joined(rest, to)),
        NameMatch::Substring(from, to) => replaced(name, from, to),
        NameMatch::Regex(regex, to) => by_regex(regex, to, name),
    }
}

fn joined(a: &str, b: &str) -> Option<Text> {
    let mut out = Text::new();
    (out.push(a) && out.push(b)).then_some(out)
}

/// `name` with every `from` replaced by `to`; `None` when it holds none.
fn replaced(name: &str, from: &str, to: &str) -> Option<Text> {
    if !name.contains(from) {
        return None;
    }
    let mut out = Text::new();
    let mut rest = name;
    while let Some(at) = rest.find(from) {
        if !(out.push(&rest[..at]) && out.push(to)) {
            return None;
        }
        rest = &rest[at + from.len()..];
    }
    out.push(rest).then_some(out)
}

/// The replacement `to` with `{N}` standing for group N of `regex`'s match of `name`; `None`
/// when it does not match. A name that does not match costs no allocation.
fn by_regex(regex: &Regex, to: &str, name: &str) -> Option<Text> {
    if !regex.is_match(name) {
        return None;
    }
    let captures = regex.captures(name)?;
    let mut out = Text::new();
    let mut rest = to;
    while let Some(open) = rest.find('{') {
        let group = rest[open + 1..].find('}').and_then(|close| {
            rest[open + 1..open + 1 + close]
                .parse::<usize>()
                .ok()
                .map(|n| (n, close))
        });
        match group {
            Some((n, close)) => {
                if !(out.push(&rest[..open]) && out.push(captures.get(n).map_or("", |m| m.as_str()))) {
                    return None;
                }
                rest = &rest[open + close + 2..];
            }
            None => {
                if !out.push(&rest[..=open]) {
                    return None;
                }
                rest = &rest[open + 1..];
            }
        }
    }
    if !out.push(rest) {
        return None;
    }
    if !out.as_str().ends_with('.') && !out.push(".") {
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::types::{class, rtype};

    fn apply(rule: &str, name: &str) -> Option<String> {
        let rule = Rule::parse(rule).unwrap();
        let mut text = Text::of(name).unwrap();
        let (mut qtype, mut qclass) = (rtype::A, class::IN);
        rule.apply(&mut text, &mut qtype, &mut qclass)
            .then(|| text.as_str().to_owned())
    }

    fn revert(rule: &str, owner: &str) -> Option<String> {
        let rule = Rule::parse(rule).unwrap();
        let mut text = Text::of(owner).unwrap();
        rule.revert(&mut text).then(|| text.as_str().to_owned())
    }

    #[test]
    fn exact_is_the_default_and_matches_the_whole_name() {
        assert_eq!(
            apply("name a.example.org b.example.net", "a.example.org.").as_deref(),
            Some("b.example.net.")
        );
        assert_eq!(
            apply("name exact a.example.org b.example.net", "x.a.example.org."),
            None
        );
    }

    #[test]
    fn prefix_suffix_and_substring_replace_their_part() {
        assert_eq!(
            apply("name prefix www. web.", "www.example.org.").as_deref(),
            Some("web.example.org.")
        );
        assert_eq!(
            apply(
                "name suffix .svc.example. .svc.cluster.local.",
                "db.default.svc.example."
            )
            .as_deref(),
            Some("db.default.svc.cluster.local.")
        );
        assert_eq!(
            apply(
                "name substring us-west-1.example.org us-west-1.consul",
                "ftp.us-west-1.example.org."
            )
            .as_deref(),
            Some("ftp.us-west-1.consul.")
        );
        assert_eq!(
            apply("name suffix .svc.example. .svc.cluster.local.", "example.org."),
            None
        );
    }

    #[test]
    fn regex_groups_fill_the_replacement() {
        assert_eq!(
            apply(
                r"name regex (.*)-(us-west-1)\.example\.org {1}.service.{2}.consul",
                "ftp-us-west-1.example.org."
            )
            .as_deref(),
            Some("ftp.service.us-west-1.consul.")
        );
    }

    #[test]
    fn answer_auto_turns_owner_names_back() {
        let rule = "name suffix .svc.example. .svc.cluster.local. answer auto";
        assert_eq!(
            revert(rule, "db.svc.cluster.local.").as_deref(),
            Some("db.svc.example.")
        );
        assert_eq!(revert(rule, "other.org."), None);
        assert_eq!(
            revert("name exact a.org. b.org. answer auto", "b.org.").as_deref(),
            Some("a.org.")
        );
        assert_eq!(
            revert("name suffix a.org. b.org.", "x.b.org."),
            None,
            "no answer rule, no revert"
        );
    }

    #[test]
    fn answer_name_turns_owner_names_back_by_regex() {
        let rule = r"name regex (.*)-(us-west-1)\.example\.org {1}.service.{2}.consul answer name (.*)\.service\.(us-west-1)\.consul {1}-{2}.example.org";
        assert_eq!(
            revert(rule, "ftp.service.us-west-1.consul.").as_deref(),
            Some("ftp-us-west-1.example.org.")
        );
    }

    #[test]
    fn type_and_class_rules_rewrite_their_field() {
        let rule = Rule::parse("continue type AAAA A").unwrap();
        assert_eq!(rule.then, Then::Continue);
        let mut text = Text::of("x.").unwrap();
        let (mut qtype, mut qclass) = (rtype::AAAA, class::IN);
        assert!(rule.apply(&mut text, &mut qtype, &mut qclass));
        assert_eq!(qtype, rtype::A);
        assert!(!rule.apply(&mut text, &mut qtype, &mut qclass), "A is not rewritten");
        let rule = Rule::parse("class CH IN").unwrap();
        let mut qclass = class::CH;
        assert!(rule.apply(&mut text, &mut qtype, &mut qclass));
        assert_eq!(qclass, class::IN);
    }

    #[test]
    fn malformed_rules_are_typed_errors() {
        assert!(matches!(Rule::parse("ttl exact a. 5"), Err(RuleError::Field(f)) if f == "ttl"));
        assert!(matches!(Rule::parse("type AAAA BOGUS"), Err(RuleError::Type(t)) if t == "BOGUS"));
        assert!(matches!(Rule::parse("name regex ( x."), Err(RuleError::Regex { .. })));
        assert!(matches!(
            Rule::parse("name regex a b answer auto"),
            Err(RuleError::Form(_))
        ));
        assert!(matches!(Rule::parse("name a"), Err(RuleError::Form(_))));
        assert!(matches!(Rule::parse(""), Err(RuleError::Form(_))));
    }
}
