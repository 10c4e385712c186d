//! The crate's modules import one another without a cycle, at every level:
//! the top-level modules (`src/NAME.rs`, `src/NAME/`) among themselves, and
//! the files of one module (`src/ingest/*.rs`) among themselves. Each is
//! below the ones that use it (docs/architecture.md).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Per parent module (`""` for the crate root): child -> the children of
/// the same parent its files name.
type Graphs = BTreeMap<String, Graph>;
type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under `src/`: `a.rs` and `a/mod.rs` are
/// `[a]`, `a/b.rs` is `[a, b]`.
fn module_path(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

fn ident(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The paths written at the start of `text` after `base`: `a::b::X` is
/// `base + [a, b, X]`, `{a, b::{c, d}}` one path per leaf.
fn paths(base: &[String], text: &str, out: &mut Vec<Vec<String>>) {
    let mut path = base.to_vec();
    let mut rest = text;
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let (mut depth, mut start) = (0, 0);
            for (at, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        paths(&path, group[start..at].trim_start(), out);
                        return;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        paths(&path, group[start..at].trim_start(), out);
                        start = at + 1;
                    }
                    _ => {}
                }
            }
            return;
        }
        let name = ident(rest);
        if name.is_empty() {
            break;
        }
        if name != "self" {
            path.push(name.to_string());
        }
        match rest[name.len()..].strip_prefix("::") {
            Some(more) => rest = more,
            None => break,
        }
    }
    if !path.is_empty() {
        out.push(path);
    }
}

/// Every path, from the crate root, that the text of the file at `module`
/// names through `crate::` or `super::`.
fn named_paths(module: &[String], text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for line in text.lines() {
        // Comments name modules without importing them.
        let code = line.split("//").next().unwrap_or_default();
        for prefix in ["crate::", "super::"] {
            for (at, _) in code.match_indices(prefix) {
                let before = code[..at].chars().next_back();
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let mut rest = &code[at + prefix.len()..];
                let base = if prefix == "crate::" {
                    &module[..0]
                } else {
                    let mut ups = 1;
                    while let Some(r) = rest.strip_prefix("super::") {
                        rest = r;
                        ups += 1;
                    }
                    &module[..module.len().saturating_sub(ups)]
                };
                paths(base, rest, &mut out);
            }
        }
    }
    out
}

fn graphs(src: &Path) -> Graphs {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<Vec<String>> = files
        .iter()
        .map(|f| module_path(f.strip_prefix(src).unwrap()))
        .filter(|m| m != &["lib"] && m != &["main"])
        .collect();
    let mut graphs = Graphs::new();
    for file in &files {
        let module = module_path(file.strip_prefix(src).unwrap());
        if !modules.contains(&module) {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for named in named_paths(&module, &text) {
            // The edge is between the two children of the modules' common
            // parent that lead to each (none between a module and its own
            // parent or child).
            let common = module
                .iter()
                .zip(&named)
                .take_while(|(a, b)| a == b)
                .count();
            if common >= module.len() || common >= named.len() {
                continue;
            }
            let target = named[..=common].to_vec();
            if !modules.contains(&target) && !modules.iter().any(|m| m.starts_with(&target)) {
                continue;
            }
            graphs
                .entry(module[..common].join("::"))
                .or_default()
                .entry(module[common].clone())
                .or_default()
                .insert(named[common].clone());
        }
    }
    graphs
}

/// A cycle of the graph as the modules along it, if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        graph: &Graph,
        node: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(graph, next, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(graph, node, &mut Vec::new(), &mut done))
}

#[test]
fn modules_import_each_other_without_a_cycle_at_every_level() {
    let graphs = graphs(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    // The graphs are read, not empty: the audit runs the engine, the
    // NDJSON reader fills rows.
    assert!(graphs[""]["audit"].contains("engine"), "{graphs:?}");
    assert!(graphs["ingest"]["ndjson"].contains("row"), "{graphs:?}");
    let cycles: Vec<String> = graphs
        .iter()
        .filter_map(|(parent, graph)| {
            let cycle = find_cycle(graph)?;
            Some(format!("in `{parent}`: {}", cycle.join(" -> ")))
        })
        .collect();
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn imports_are_read_from_every_form_of_path() {
    let module = ["ingest".to_string(), "row".to_string()];
    let text = "use crate::{audit, engine::{self, X}};\n\
                use super::super::report::Y;\n\
                use super::schema::EVENTS; // crate::cli in a comment\n\
                let f = crate::rules::run(); let g = hvaudit::crate_like::Z;";
    let named: Vec<String> = named_paths(&module, text)
        .iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(
        named,
        [
            "audit",
            "engine",
            "engine::X",
            "report::Y",
            "ingest::schema::EVENTS",
            "rules::run"
        ]
    );
    let graph = Graph::from([
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["c".to_string()])),
        ("c".to_string(), BTreeSet::from(["a".to_string()])),
    ]);
    assert_eq!(find_cycle(&graph).unwrap(), ["a", "b", "c", "a"]);
}
