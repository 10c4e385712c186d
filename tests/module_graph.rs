//! The crate's top-level modules (`src/NAME.rs`, `src/NAME/`) import one
//! another without a cycle: each is below the ones that use it
//! (docs/architecture.md).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level module -> the top-level modules its files name.
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

/// The first names of a path that starts at the crate root, given the text
/// right after `crate::`: `audit::X` names `audit`, `{audit, engine::Y}`
/// both.
fn root_names(rest: &str) -> Vec<&str> {
    let Some(group) = rest.strip_prefix('{') else {
        return vec![ident(rest)];
    };
    let (mut names, mut depth, mut start) = (Vec::new(), 0, 0);
    for (at, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                names.push(ident(group[start..at].trim_start()));
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                names.push(ident(group[start..at].trim_start()));
                start = at + 1;
            }
            _ => {}
        }
    }
    names
}

/// Every top-level module the text of the file at `module` names through
/// `crate::` or enough `super::` to reach the crate root.
fn named_modules<'a>(module: &[String], text: &'a str) -> Vec<&'a str> {
    let mut names = Vec::new();
    for line in text.lines() {
        // Comments name modules without importing them.
        let code = line.split("//").next().unwrap_or_default();
        for (at, _) in code.match_indices("crate::") {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            names.extend(root_names(&code[at + "crate::".len()..]));
        }
        for (at, _) in code.match_indices("super::") {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut rest = &code[at..];
            let mut ups = 0;
            while let Some(r) = rest.strip_prefix("super::") {
                rest = r;
                ups += 1;
            }
            if ups >= module.len() {
                names.extend(root_names(rest));
            }
        }
    }
    names
}

fn graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|f| module_path(f.strip_prefix(src).unwrap()).first().cloned())
        .filter(|m| m != "lib" && m != "main")
        .collect();
    let mut graph = Graph::new();
    for file in &files {
        let module = module_path(file.strip_prefix(src).unwrap());
        let Some(top) = module.first().filter(|m| modules.contains(*m)) else {
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        let edges = graph.entry(top.clone()).or_default();
        for name in named_modules(&module, &text) {
            if name != top.as_str() && modules.contains(name) {
                edges.insert(name.to_string());
            }
        }
    }
    graph
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
fn the_top_level_modules_import_each_other_without_a_cycle() {
    let graph = graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    // The graph is read, not empty: the audit runs the engine.
    assert!(graph["audit"].contains("engine"), "{graph:?}");
    if let Some(cycle) = find_cycle(&graph) {
        panic!("import cycle: {}", cycle.join(" -> "));
    }
}

#[test]
fn imports_are_read_from_every_form_of_path() {
    let module = ["ingest".to_string(), "row".to_string()];
    let text = "use crate::{audit, engine::{self, X}};\n\
                use super::super::report::Y;\n\
                use super::schema::EVENTS; // crate::cli in a comment\n\
                let f = crate::rules::run(); let g = hvaudit::crate_like::Z;";
    assert_eq!(
        named_modules(&module, text),
        ["audit", "engine", "report", "rules"]
    );
    let graph = Graph::from([
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["c".to_string()])),
        ("c".to_string(), BTreeSet::from(["a".to_string()])),
    ]);
    assert_eq!(find_cycle(&graph).unwrap(), ["a", "b", "c", "a"]);
}
