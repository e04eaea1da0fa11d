//! ARCHITECTURE.md's dependency rule, read from the sources: within each crate, the top-level
//! modules depend on each other without cycles, tests aside: a cycle fails this test with the
//! edges that make it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates' source directories, from the repository root.
const CRATES: [&str; 3] = ["src", "dataplane/src", "controlplane/src"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The top-level modules of a crate: its `NAME.rs` files and `NAME/` directories.
fn modules(src: &Path) -> BTreeSet<String> {
    std::fs::read_dir(src)
        .unwrap_or_else(|e| panic!("{}: {e}", src.display()))
        .map(|entry| entry.unwrap().path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_owned();
            if path.is_dir() {
                Some(name)
            } else {
                let stem = name.strip_suffix(".rs")?;
                (stem != "lib" && stem != "main").then(|| stem.to_owned())
            }
        })
        .collect()
}

/// The files of the modules `file` declares under `#[cfg(test)]` (`#[cfg(test)] mod NAME;`).
fn test_modules_of(file: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    let dir = match stem {
        "mod" | "lib" | "main" => file.parent().map(Path::to_path_buf),
        _ => file.parent().map(|p| p.join(stem)),
    }
    .unwrap_or_default();
    let mut lines = text.lines();
    let mut found = Vec::new();
    while let Some(line) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            continue;
        }
        let Some(next) = lines.next() else { break };
        let declared = next.trim().trim_start_matches("pub(crate) ").trim_start_matches("pub ");
        if let Some(name) = declared.strip_prefix("mod ").and_then(|rest| rest.strip_suffix(';')) {
            found.push(dir.join(format!("{name}.rs")));
            found.push(dir.join(name));
        }
    }
    found
}

/// Every `.rs` file of module `name`, its tests left out (files named `tests.rs`, directories
/// named `tests`, and modules declared under `#[cfg(test)]`).
fn files_of(src: &Path, name: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let file = src.join(format!("{name}.rs"));
    if file.is_file() {
        files.push(file);
    }
    let mut dirs = vec![src.join(name)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if path.is_dir() {
                if file_name != "tests" {
                    dirs.push(path);
                }
            } else if file_name.ends_with(".rs") && file_name != "tests.rs" {
                files.push(path);
            }
        }
    }
    let test_only: Vec<PathBuf> = files.iter().flat_map(|f| test_modules_of(f)).collect();
    files.retain(|f| !test_only.iter().any(|t| f.starts_with(t)));
    files
}

/// The code of a file without comments and without its `#[cfg(test)]` modules.
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") && lines.peek().is_some_and(|next| next.trim_start().starts_with("mod "))
        {
            let opening = lines.next().unwrap_or_default();
            if opening.trim_end().ends_with(';') {
                continue;
            }
            let mut depth = opening.matches('{').count() as i64 - opening.matches('}').count() as i64;
            while depth > 0 {
                let Some(inner) = lines.next() else { break };
                depth += inner.matches('{').count() as i64 - inner.matches('}').count() as i64;
            }
            continue;
        }
        let without_comment = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        out.push_str(without_comment);
        out.push('\n');
    }
    out
}

/// The modules of the crate at `src` each module names as `crate::MODULE`.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules(src);
    mods.iter()
        .map(|m| {
            let mut deps = BTreeSet::new();
            for file in files_of(src, m) {
                let text = code(&std::fs::read_to_string(&file).unwrap());
                for (at, _) in text.match_indices("crate::") {
                    let before = text[..at].chars().next_back();
                    if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                        continue;
                    }
                    let name: String = text[at + "crate::".len()..]
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if name != *m && mods.contains(&name) {
                        deps.insert(name);
                    }
                }
            }
            (m.clone(), deps)
        })
        .collect()
}

/// The strongly connected components of more than one module (Tarjan's algorithm).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<BTreeSet<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in &s.graph[v] {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.insert(w.to_owned());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !state.index.contains_key(v.as_str()) {
            visit(&mut state, v);
        }
    }
    state.found
}

#[test]
fn the_top_level_modules_have_no_cycles() {
    for krate in CRATES {
        let graph = graph(&root().join(krate));
        let edges = |cycle: &BTreeSet<String>| {
            cycle
                .iter()
                .map(|m| format!("{m} -> {:?}", graph[m].intersection(cycle).collect::<Vec<_>>()))
                .collect::<Vec<_>>()
                .join("; ")
        };
        let found = cycles(&graph);
        assert!(
            found.is_empty(),
            "{krate}: module cycles: {}",
            found.iter().map(edges).collect::<Vec<_>>().join(" | ")
        );
    }
}

#[test]
fn the_reader_finds_a_cycle_and_skips_comments_and_tests() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\nmod c;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::b::B;\n// crate::c in a comment\n").unwrap();
    std::fs::create_dir(src.join("b")).unwrap();
    std::fs::write(src.join("b/mod.rs"), "pub struct B(crate::a::A);\n").unwrap();
    std::fs::write(src.join("b/tests.rs"), "use crate::c::C;\n").unwrap();
    std::fs::write(src.join("b/replies.rs"), "use crate::c::C;\n").unwrap();
    std::fs::write(
        src.join("b/mod.rs"),
        "pub struct B(crate::a::A);\n#[cfg(test)]\nmod replies;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("c.rs"),
        "pub struct C;\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n",
    )
    .unwrap();
    let graph = graph(src);
    assert_eq!(graph["c"], BTreeSet::new(), "tests and comments are not dependencies");
    assert_eq!(
        graph["b"],
        ["a".to_string()].into(),
        "nor a module declared for tests only"
    );
    let found = cycles(&graph);
    assert_eq!(found, [["a", "b"].iter().map(|s| s.to_string()).collect()]);
}
