//! The documentation the binary points at: docs/rules.md is what the rule
//! headers say, and every protocol section a rule or view cites exists.

use crate::common::hvaudit;
use hvaudit::rules::catalog::Catalog;
use hvaudit::rules::reference::REGENERATE;
use std::path::Path;

fn repo(path: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn docs_rules_md_is_written_from_the_rule_headers() {
    let out = hvaudit()
        .timeout(std::time::Duration::from_secs(60))
        .args(["rules", "list", "--format", "md"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let generated = String::from_utf8(out.stdout).unwrap();
    let file = repo("docs/rules.md");
    if generated != file {
        let at = generated
            .lines()
            .zip(file.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| generated.lines().count().min(file.lines().count()));
        panic!(
            "docs/rules.md is stale (first difference at line {}: {:?}); run `{REGENERATE}`",
            at + 1,
            generated.lines().nth(at)
        );
    }
    // Every built-in rule has its section.
    for r in &Catalog::embedded().unwrap().rules {
        assert!(
            file.contains(&format!("<a id=\"{}\"></a>", r.meta.id)),
            "{}",
            r.meta.id
        );
    }
}

/// The section numbers docs/protocol.md has: "## 4. Title" and "### 9.6 Title".
fn protocol_sections() -> Vec<String> {
    repo("docs/protocol.md")
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("### ").or_else(|| l.strip_prefix("## "))?;
            let number = rest.split_whitespace().next()?.trim_end_matches('.');
            number
                .chars()
                .all(|c| c.is_ascii_digit() || c == '.')
                .then(|| number.to_string())
        })
        .collect()
}

/// The "§N" and "§N.M" references in a text.
fn section_refs(text: &str) -> Vec<String> {
    text.split('§')
        .skip(1)
        .map(|rest| {
            let n: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            n.trim_end_matches('.').to_string()
        })
        .collect()
}

#[test]
fn every_protocol_section_a_rule_or_view_cites_exists() {
    let sections = protocol_sections();
    assert!(sections.len() >= 10, "{sections:?}");
    for r in &Catalog::embedded().unwrap().rules {
        let spec = &r.meta.spec;
        assert!(
            spec.starts_with("docs/protocol.md §"),
            "{}: spec {spec:?} should name docs/protocol.md sections",
            r.meta.id
        );
        let cited = section_refs(spec);
        assert!(!cited.is_empty(), "{}", r.meta.id);
        for s in cited {
            assert!(
                sections.contains(&s),
                "{}: no §{s} in docs/protocol.md",
                r.meta.id
            );
        }
        for s in section_refs(&r.meta.explain) {
            assert!(
                sections.contains(&s),
                "{}: no §{s} in docs/protocol.md",
                r.meta.id
            );
        }
    }
    let views = Path::new(env!("CARGO_MANIFEST_DIR")).join("queries/views");
    for entry in std::fs::read_dir(views).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for line in text.lines().filter(|l| l.contains("docs/protocol.md")) {
            for s in section_refs(line) {
                assert!(sections.contains(&s), "{}: §{s}", path.display());
            }
        }
    }
}

#[test]
fn section_references_are_read_as_numbers() {
    assert_eq!(
        section_refs("docs/protocol.md §4 (x), §9.6 (active)."),
        ["4", "9.6"]
    );
}

#[test]
fn rules_explain_names_the_protocol_sections() {
    let out = hvaudit()
        .timeout(std::time::Duration::from_secs(60))
        .args(["rules", "explain", "token.replayed"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("Spec: docs/protocol.md §5 (delegation and handoff tokens)"),
        "{text}"
    );
    assert!(text.contains("docs/rules.md"), "{text}");
}

#[test]
fn the_repository_cites_no_notes_it_does_not_hold() {
    // Names put together here, so that this file does not hold them.
    let absent = [
        format!("{}.md", "RULES"),
        format!("{}-{}.md", "SPEC", "NOTES"),
    ];
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    for dir in ["src", "queries", "docs", "tests", "benches", "samples"] {
        for entry in walkdir::WalkDir::new(root.join(dir)) {
            let entry = entry.unwrap();
            if entry.file_type().is_file() && !entry.path().starts_with(root.join("tests/fixtures"))
            {
                files.push(entry.into_path());
            }
        }
    }
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue; // not text
        };
        for name in &absent {
            assert!(
                !text.contains(name.as_str()),
                "{} cites {name}; point at docs/rules.md or docs/protocol.md",
                file.display()
            );
        }
    }
}
