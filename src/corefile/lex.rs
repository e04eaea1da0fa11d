//! The Corefile's tokens, as CoreDNS reads them: words separated by white space, `"…"` quoting
//! (a quoted word may hold spaces, newlines and `\"`), `#` comments to the end of the line where a
//! word would begin, and `{$NAME}` (or `{%NAME%}`) replaced by the environment variable's value,
//! the empty string when it is unset. Every token keeps the file and line it came from, which
//! every message about it names.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// Where a token was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The file, as it was named (the Corefile, or the file an `import` named).
    pub file: Arc<Path>,
    /// Its line, from 1.
    pub line: usize,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// One word of a Corefile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The word, unquoted, its environment placeholders replaced.
    pub text: String,
    /// Whether it was quoted: a quoted `{` or `}` is a word, not a brace.
    pub quoted: bool,
    /// Where it was written.
    pub place: Place,
}

impl Token {
    /// Whether this is the brace `brace` (`{` or `}`), unquoted.
    pub fn is(&self, brace: &str) -> bool {
        !self.quoted && self.text == brace
    }
}

/// A quote left open at the end of the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{place}: a quoted word is not closed before the end of the file")]
pub struct Unclosed {
    /// Where the quote opened.
    pub place: Place,
}

/// Splits `text`, read from `file`, into tokens, reading environment variables through `env`.
pub fn tokens(text: &str, file: &Arc<Path>, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<Token>, Unclosed> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c == '\n' {
            line += 1;
            chars.next();
            continue;
        }
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        if c == '#' {
            while chars.peek().is_some_and(|&c| c != '\n') {
                chars.next();
            }
            continue;
        }
        let place = Place {
            file: Arc::clone(file),
            line,
        };
        let mut word = String::new();
        let quoted = c == '"';
        if quoted {
            chars.next();
            let mut closed = false;
            while let Some(c) = chars.next() {
                match c {
                    '\\' if chars.peek() == Some(&'"') => {
                        word.push('"');
                        chars.next();
                    }
                    '"' => {
                        closed = true;
                        break;
                    }
                    '\n' => {
                        line += 1;
                        word.push(c);
                    }
                    c => word.push(c),
                }
            }
            if !closed {
                return Err(Unclosed { place });
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
        out.push(Token {
            text: substitute(&word, env),
            quoted,
            place,
        });
    }
    Ok(out)
}

/// `word` with each `{$NAME}` and `{%NAME%}` replaced by the variable's value.
fn substitute(word: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        let placeholder = if let Some(name) = after.strip_prefix("{$") {
            name.find('}').map(|end| (&name[..end], end + 3))
        } else if let Some(name) = after.strip_prefix("{%") {
            name.find("%}").map(|end| (&name[..end], end + 4))
        } else {
            None
        };
        match placeholder {
            Some((name, len)) if !name.is_empty() => {
                out.push_str(&env(name).unwrap_or_default());
                rest = &after[len..];
            }
            _ => {
                out.push('{');
                rest = &after[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lex(text: &str) -> Vec<(String, usize)> {
        let file: Arc<Path> = Arc::from(Path::new("Corefile"));
        let env = |name: &str| (name == "UPSTREAM").then(|| "10.0.0.10".to_owned());
        tokens(text, &file, &env)
            .unwrap()
            .into_iter()
            .map(|t| (t.text, t.place.line))
            .collect()
    }

    #[test]
    fn words_comments_and_lines() {
        let got = lex(".:53 {\n  forward . 1.1.1.1 # the upstream\n  # a whole line\n}\n");
        let want = [
            (".:53", 1),
            ("{", 1),
            ("forward", 2),
            (".", 2),
            ("1.1.1.1", 2),
            ("}", 4),
        ];
        assert_eq!(got, want.map(|(t, l)| (t.to_owned(), l)));
    }

    #[test]
    fn a_hash_inside_a_word_is_not_a_comment() {
        assert_eq!(lex("a#b"), [("a#b".to_owned(), 1)]);
    }

    #[test]
    fn quoted_words_keep_spaces_escaped_quotes_and_count_lines() {
        let got = lex("answer \"{{ .Name }} 60 IN A \\\"x\\\"\nnext\" after");
        assert_eq!(
            got,
            [
                ("answer".to_owned(), 1),
                ("{{ .Name }} 60 IN A \"x\"\nnext".to_owned(), 1),
                ("after".to_owned(), 2)
            ]
        );
    }

    #[test]
    fn environment_placeholders_are_replaced_unset_ones_by_nothing() {
        let got = lex("forward . {$UPSTREAM} {%UPSTREAM%}:53 x{$UNSET}y {{ .Name }}");
        let texts: Vec<_> = got.into_iter().map(|(t, _)| t).collect();
        assert_eq!(
            texts,
            [("forward"), ".", "10.0.0.10", "10.0.0.10:53", "xy", "{{", ".Name", "}}"]
        );
    }

    #[test]
    fn an_unclosed_quote_names_where_it_opened() {
        let file: Arc<Path> = Arc::from(Path::new("Corefile"));
        let err = tokens("a\n\"open", &file, &|_| None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Corefile:2: a quoted word is not closed before the end of the file"
        );
    }
}
