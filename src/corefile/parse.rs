//! A Corefile's structure, as CoreDNS reads it: server blocks, each a list of keys (zones with
//! an optional scheme and port: `.:53`, `dns://cluster.local:53`, several per block) and the
//! plugins (directives) it runs, each a line of words with an optional `{ … }` block of lines
//! of its own. `(name) { … }` defines a snippet; `import` on a line of its own pulls in a
//! snippet or files (a path or a glob, relative to the importing file's directory), wherever a
//! line may stand, server blocks included.

use super::lex::{self, Place, Token};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How deep imports may nest before they are taken for a cycle.
const MAX_IMPORT_DEPTH: usize = 32;

/// One server block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerBlock {
    /// Its keys, one per zone and port, commas removed.
    pub keys: Vec<Token>,
    /// Its plugins, in the order written.
    pub directives: Vec<Directive>,
}

/// A line of a block: a plugin and its words, or one of a plugin's option lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    /// Its first word: the plugin or the option.
    pub name: Token,
    /// The words after it on its line.
    pub args: Vec<Token>,
    /// The lines of its `{ … }` block, if it has one.
    pub block: Vec<Directive>,
}

/// Why a Corefile cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// A file (the Corefile or an imported one) cannot be read.
    #[error("{}: cannot read: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A quote is not closed.
    #[error(transparent)]
    Unclosed(#[from] lex::Unclosed),
    /// The words are not in the shape of a Corefile.
    #[error("{place}: {message}")]
    Syntax {
        /// Where.
        place: Place,
        /// What was expected.
        message: String,
    },
}

fn syntax(place: &Place, message: impl Into<String>) -> ParseError {
    ParseError::Syntax {
        place: place.clone(),
        message: message.into(),
    }
}

/// Reads the Corefile at `path` and the files it imports, with `env` as the environment.
pub fn read(path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<ServerBlock>, ParseError> {
    let mut expander = Expander {
        env,
        snippets: HashMap::new(),
    };
    let tokens = expander.file(path, 0)?;
    blocks(&tokens)
}

/// Parses Corefile `text` as if read from `path` (imports relative to its directory).
#[cfg(test)]
pub fn parse(text: &str, path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<ServerBlock>, ParseError> {
    let mut expander = Expander {
        env,
        snippets: HashMap::new(),
    };
    let file: Arc<Path> = Arc::from(path);
    let tokens = lex::tokens(text, &file, env)?;
    let tokens = expander.expand(tokens, 0)?;
    blocks(&tokens)
}

/// Replaces `import` lines by what they name and takes snippet definitions out.
struct Expander<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    snippets: HashMap<String, Vec<Token>>,
}

impl Expander<'_> {
    fn file(&mut self, path: &Path, depth: usize) -> Result<Vec<Token>, ParseError> {
        let text = std::fs::read_to_string(path).map_err(|source| ParseError::Read {
            path: path.to_owned(),
            source,
        })?;
        let file: Arc<Path> = Arc::from(path);
        let tokens = lex::tokens(&text, &file, self.env)?;
        self.expand(tokens, depth)
    }

    fn expand(&mut self, tokens: Vec<Token>, depth: usize) -> Result<Vec<Token>, ParseError> {
        let mut out = Vec::with_capacity(tokens.len());
        let mut braces = 0usize;
        let mut i = 0;
        while i < tokens.len() {
            let token = &tokens[i];
            let starts_line = starts_line(&tokens, i);
            if starts_line && !token.quoted && token.text == "import" {
                let args = line_end(&tokens, i + 1) - (i + 1);
                if args == 0 {
                    return Err(syntax(&token.place, "import names no snippet or file"));
                }
                if depth >= MAX_IMPORT_DEPTH {
                    return Err(syntax(
                        &token.place,
                        format!("imports nest more than {MAX_IMPORT_DEPTH} deep: an import cycle?"),
                    ));
                }
                for arg in &tokens[i + 1..i + 1 + args] {
                    out.extend(self.import(arg, depth + 1)?);
                }
                i += 1 + args;
                continue;
            }
            let snippet = braces == 0
                && starts_line
                && token.text.len() > 2
                && token.text.starts_with('(')
                && token.text.ends_with(')')
                && tokens.get(i + 1).is_some_and(|t| t.is("{"));
            if snippet {
                let end = matching_brace(&tokens, i + 1)?;
                let name = token.text[1..token.text.len() - 1].to_owned();
                self.snippets.insert(name, tokens[i + 2..end].to_vec());
                i = end + 1;
                continue;
            }
            if token.is("{") {
                braces += 1;
            } else if token.is("}") {
                braces = braces.saturating_sub(1);
            }
            out.push(token.clone());
            i += 1;
        }
        Ok(out)
    }

    /// The tokens `import ARG` stands for: a snippet's, else those of the files the path or
    /// glob names. A glob that matches nothing imports nothing; a plain path must exist.
    fn import(&mut self, arg: &Token, depth: usize) -> Result<Vec<Token>, ParseError> {
        if let Some(body) = self.snippets.get(&arg.text) {
            let body = body.clone();
            return self.expand(body, depth);
        }
        let dir = arg.place.file.parent().unwrap_or(Path::new(""));
        let pattern = dir.join(&arg.text);
        let pattern_text = pattern.to_string_lossy().into_owned();
        let is_glob = arg.text.contains(['*', '?', '[']);
        let paths: Vec<PathBuf> = if is_glob {
            let mut paths = glob(&pattern).map_err(|e| syntax(&arg.place, format!("import {}: {e}", arg.text)))?;
            paths.sort();
            paths
        } else if pattern.exists() {
            vec![pattern]
        } else {
            return Err(syntax(
                &arg.place,
                format!(
                    "import {}: no snippet of that name and no file {pattern_text}",
                    arg.text
                ),
            ));
        };
        let mut out = Vec::new();
        for path in paths {
            out.extend(self.file(&path, depth)?);
        }
        Ok(out)
    }
}

/// The files matching `pattern`, whose wildcards (`*`, `?`, `[…]`) stand in its last
/// component only, as in CoreDNS's imports of a directory's files.
fn glob(pattern: &Path) -> Result<Vec<PathBuf>, String> {
    let dir = pattern.parent().unwrap_or(Path::new("."));
    let name = pattern
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or("the pattern has no file name")?;
    if dir.to_string_lossy().contains(['*', '?', '[']) {
        return Err("wildcards may stand only in the file name".into());
    }
    let entries = match std::fs::read_dir(if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    }) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot list {}: {e}", dir.display())),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(file_name) = file_name.to_str() else { continue };
        if matches(name.as_bytes(), file_name.as_bytes()) && entry.path().is_file() {
            out.push(entry.path());
        }
    }
    Ok(out)
}

/// Shell-style matching of `name` against `pattern` (`*`, `?`, `[abc]`, `[a-z]`, `[!a]`).
fn matches(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|skip| matches(rest, &name[skip..])),
        Some((b'?', rest)) => !name.is_empty() && matches(rest, &name[1..]),
        Some((b'[', rest)) => {
            let Some(close) = rest.iter().skip(1).position(|&b| b == b']').map(|p| p + 1) else {
                return name.first() == Some(&b'[') && matches(rest, &name[1..]);
            };
            let Some((&c, name_rest)) = name.split_first() else {
                return false;
            };
            let (negated, set) = match rest[..close].split_first() {
                Some((b'!' | b'^', set)) => (true, set),
                _ => (false, &rest[..close]),
            };
            let mut hit = false;
            let mut k = 0;
            while k < set.len() {
                if k + 2 < set.len() && set[k + 1] == b'-' {
                    hit |= set[k] <= c && c <= set[k + 2];
                    k += 3;
                } else {
                    hit |= set[k] == c;
                    k += 1;
                }
            }
            hit != negated && matches(&rest[close + 1..], name_rest)
        }
        Some((&b, rest)) => name.first() == Some(&b) && matches(rest, &name[1..]),
    }
}

/// Whether `tokens[i]` is the first word of its line.
fn starts_line(tokens: &[Token], i: usize) -> bool {
    i == 0 || {
        let (before, token) = (&tokens[i - 1], &tokens[i]);
        before.place != token.place || before.is("{") || before.is("}")
    }
}

/// The index past the last word on the line of `tokens[from - 1]`, a trailing `{` left out.
fn line_end(tokens: &[Token], from: usize) -> usize {
    let mut end = from;
    while end < tokens.len() && !starts_line(tokens, end) && !tokens[end].is("{") && !tokens[end].is("}") {
        end += 1;
    }
    end
}

/// The index of the `}` closing the `{` at `open`.
fn matching_brace(tokens: &[Token], open: usize) -> Result<usize, ParseError> {
    let mut depth = 0usize;
    for (i, token) in tokens.iter().enumerate().skip(open) {
        if token.is("{") {
            depth += 1;
        } else if token.is("}") {
            depth -= 1;
            if depth == 0 {
                return Ok(i);
            }
        }
    }
    Err(syntax(&tokens[open].place, "this '{' is never closed"))
}

/// The server blocks of an expanded token list.
fn blocks(tokens: &[Token]) -> Result<Vec<ServerBlock>, ParseError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let first = &tokens[i];
        if first.is("{") || first.is("}") {
            return Err(syntax(
                &first.place,
                format!("'{}' where a server block's keys should be", first.text),
            ));
        }
        let mut keys = Vec::new();
        loop {
            let token = &tokens[i];
            let continued = token.text.ends_with(',');
            keys.extend(token.text.split(',').filter(|k| !k.is_empty()).map(|text| Token {
                text: text.to_owned(),
                quoted: token.quoted,
                place: token.place.clone(),
            }));
            i += 1;
            match tokens.get(i) {
                Some(next) if next.is("{") => break,
                Some(next) if !starts_line(tokens, i) || continued || next.text.starts_with(',') => continue,
                Some(_) if out.is_empty() => {
                    // A Corefile of one block may leave out the braces: the rest is its body.
                    let directives = lines(tokens, i, tokens.len())?;
                    out.push(ServerBlock { keys, directives });
                    return Ok(out);
                }
                Some(next) => return Err(syntax(&next.place, "expected '{' after the server block's keys")),
                None => return Err(syntax(&token.place, "a server block's keys without a '{ … }' body")),
            }
        }
        let close = matching_brace(tokens, i)?;
        let directives = lines(tokens, i + 1, close)?;
        out.push(ServerBlock { keys, directives });
        i = close + 1;
    }
    Ok(out)
}

/// The lines of `tokens[from..to]`, each with its nested block.
fn lines(tokens: &[Token], from: usize, to: usize) -> Result<Vec<Directive>, ParseError> {
    let mut out = Vec::new();
    let mut i = from;
    while i < to {
        let name = &tokens[i];
        if name.is("{") || name.is("}") {
            return Err(syntax(&name.place, format!("unexpected '{}'", name.text)));
        }
        let end = line_end(tokens, i + 1).min(to);
        let args = tokens[i + 1..end].to_vec();
        i = end;
        let mut block = Vec::new();
        if i < to && tokens[i].is("{") {
            let close = matching_brace(tokens, i)?;
            if close >= to {
                return Err(syntax(&tokens[i].place, "this '{' is never closed"));
            }
            block = lines(tokens, i + 1, close)?;
            i = close + 1;
        }
        out.push(Directive {
            name: name.clone(),
            args,
            block,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(tokens: &[Token]) -> Vec<&str> {
        tokens.iter().map(|t| t.text.as_str()).collect()
    }

    fn parse_ok(text: &str) -> Vec<ServerBlock> {
        parse(text, Path::new("/nonexistent/Corefile"), &|_| None).unwrap()
    }

    #[test]
    fn the_kubeadm_corefile() {
        let blocks = parse_ok(
            ".:53 {\n    errors\n    health {\n       lameduck 5s\n    }\n    ready\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n       pods insecure\n       fallthrough in-addr.arpa ip6.arpa\n       ttl 30\n    }\n    prometheus :9153\n    forward . /etc/resolv.conf {\n       max_concurrent 1000\n    }\n    cache 30\n    loop\n    reload\n    loadbalance\n}\n",
        );
        assert_eq!(blocks.len(), 1);
        assert_eq!(words(&blocks[0].keys), [".:53"]);
        let names: Vec<_> = blocks[0].directives.iter().map(|d| d.name.text.as_str()).collect();
        assert_eq!(
            names,
            [
                "errors",
                "health",
                "ready",
                "kubernetes",
                "prometheus",
                "forward",
                "cache",
                "loop",
                "reload",
                "loadbalance"
            ]
        );
        let kubernetes = &blocks[0].directives[3];
        assert_eq!(words(&kubernetes.args), ["cluster.local", "in-addr.arpa", "ip6.arpa"]);
        assert_eq!(kubernetes.block.len(), 3);
        assert_eq!(words(&kubernetes.block[1].args), ["in-addr.arpa", "ip6.arpa"]);
        assert_eq!(kubernetes.block[2].name.place.line, 10);
    }

    #[test]
    fn several_keys_commas_and_spaces() {
        let blocks = parse_ok("example.org:53, example.net:53 dns://a.test:53 {\n whoami\n}\nb.test {\n}\n");
        assert_eq!(
            words(&blocks[0].keys),
            ["example.org:53", "example.net:53", "dns://a.test:53"]
        );
        assert_eq!(words(&blocks[1].keys), ["b.test"]);
        assert!(blocks[1].directives.is_empty());
    }

    #[test]
    fn one_line_blocks() {
        let blocks = parse_ok(".:53 { kubernetes cluster.local { pods verified } \n cache 30 }");
        let d = &blocks[0].directives;
        assert_eq!(d[0].name.text, "kubernetes");
        assert_eq!(words(&d[0].block[0].args), ["verified"]);
        assert_eq!(d[1].name.text, "cache");
    }

    #[test]
    fn snippets_are_imported_where_named() {
        let blocks = parse_ok("(common) {\n errors\n cache 30\n}\n.:53 {\n import common\n forward . 1.1.1.1\n}\n");
        assert_eq!(blocks.len(), 1);
        let names: Vec<_> = blocks[0].directives.iter().map(|d| d.name.text.as_str()).collect();
        assert_eq!(names, ["errors", "cache", "forward"]);
    }

    #[test]
    fn files_and_globs_are_imported_relative_to_the_importing_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("custom")).unwrap();
        std::fs::write(dir.path().join("custom/a.override"), "log\n").unwrap();
        std::fs::write(dir.path().join("custom/b.override"), "whoami\n").unwrap();
        std::fs::write(dir.path().join("custom/extra.server"), "example.org {\n whoami\n}\n").unwrap();
        std::fs::write(
            dir.path().join("Corefile"),
            ".:53 {\n errors\n import custom/*.override\n import custom/*.none\n}\nimport custom/*.server\n",
        )
        .unwrap();
        let blocks = read(&dir.path().join("Corefile"), &|_| None).unwrap();
        assert_eq!(blocks.len(), 2);
        let names: Vec<_> = blocks[0].directives.iter().map(|d| d.name.text.as_str()).collect();
        assert_eq!(names, ["errors", "log", "whoami"]);
        assert_eq!(
            blocks[0].directives[1].name.place.file.file_name().unwrap(),
            "a.override"
        );
        assert_eq!(words(&blocks[1].keys), ["example.org"]);
    }

    #[test]
    fn an_import_cycle_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Corefile"), ".:53 {\n import other\n}\n").unwrap();
        std::fs::write(dir.path().join("other"), "import other\n").unwrap();
        let err = read(&dir.path().join("Corefile"), &|_| None).unwrap_err();
        assert!(err.to_string().contains("import cycle"), "{err}");
    }

    #[test]
    fn a_missing_import_and_an_unclosed_brace_name_their_line() {
        let err = parse(".:53 {\n import nothing-here\n}\n", Path::new("/x/Corefile"), &|_| None).unwrap_err();
        assert!(
            err.to_string().starts_with("/x/Corefile:2: import nothing-here"),
            "{err}"
        );
        let err = parse(".:53 {\n cache {\n}\n", Path::new("/x/Corefile"), &|_| None).unwrap_err();
        assert!(
            err.to_string().starts_with("/x/Corefile:1: this '{' is never closed"),
            "{err}"
        );
    }

    #[test]
    fn a_single_block_may_leave_out_its_braces() {
        let blocks = parse_ok(".:1053\nwhoami\nlog\n");
        assert_eq!(blocks[0].directives.len(), 2);
    }

    #[test]
    fn glob_patterns() {
        assert!(matches(b"*.override", b"a.override"));
        assert!(!matches(b"*.override", b"a.server"));
        assert!(matches(b"f?[0-9]", b"fa7"));
        assert!(!matches(b"f[!a]", b"fa"));
    }
}
