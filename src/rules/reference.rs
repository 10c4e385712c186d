//! The rule reference, `docs/rules.md`, written from the rule headers
//! (`hvaudit rules list --format md`): the headers stay the one place a
//! rule is described, and a test compares the file with them.

use super::catalog::{Catalog, Rule};
use std::fmt::Write;

/// The command that writes `docs/rules.md` (without a configuration file,
/// whose severities and exclusions would change the built-in reference).
pub const REGENERATE: &str = "hvaudit --no-config rules list --format md > docs/rules.md";

/// Headings of the built-in families; another family is titled by its name.
const FAMILIES: &[(&str, &str)] = &[
    ("orphan", "Orphaned children"),
    ("parent", "Parents terminated early"),
    ("token", "Reused handoff tokens"),
    ("checkpoint", "Missing checkpoints"),
    ("decision", "Unverified decisions"),
    ("provenance", "Provenance"),
    ("lifecycle", "Task lifecycle"),
    ("delegation", "Delegation"),
    ("integrity", "Integrity"),
    ("envelope", "Envelope"),
    ("subscription", "Subscriptions"),
    ("payload", "Payloads"),
];

/// The Markdown reference of the catalog's rules, families in the order
/// above (others after them, by name), rules by id within a family.
pub fn markdown(c: &Catalog) -> String {
    let mut out = String::new();
    out.push_str("# Rules\n\n");
    let _ = writeln!(
        out,
        "<!-- Written by `{REGENERATE}` from the headers of queries/rules/*.sql: \
         edit those, then run it again. -->\n"
    );
    out.push_str(
        "Every rule is one SQL file, `queries/rules/<id>.sql`, whose header gives what \
         follows. Severities, from the most urgent: critical, high, medium, low, info. \
         The dialect says which runtime semantics the rule checks: `0.1`, `0.2` or `any` \
         ([protocol.md](protocol.md) §1). Each rule's *spec* names the sections of \
         [protocol.md](protocol.md) it rests on. `hvaudit rules explain ID` prints the \
         same text.\n\n",
    );
    out.push_str("| rule | severity | dialect | summary |\n|---|---|---|---|\n");
    let families = families(c);
    for (_, _, rules) in &families {
        for r in rules {
            let m = &r.meta;
            let _ = writeln!(
                out,
                "| [{}](#{}) | {} | {} | {} |",
                text(&m.id),
                attribute(&m.id),
                m.severity,
                text(&m.dialect),
                text(&m.summary)
            );
        }
    }
    for (title, family, rules) in &families {
        let _ = write!(out, "\n## {} (`{family}.*`)\n", text(title));
        for r in rules {
            rule(&mut out, r);
        }
    }
    out
}

/// The rules grouped by family: (heading, family, rules).
fn families(c: &Catalog) -> Vec<(&str, &str, Vec<&Rule>)> {
    let rank = |family: &str| {
        FAMILIES
            .iter()
            .position(|(f, _)| *f == family)
            .unwrap_or(FAMILIES.len())
    };
    let mut names = c.families();
    names.sort_by_key(|f| (rank(f), *f));
    names
        .into_iter()
        .map(|f| {
            let title = FAMILIES
                .iter()
                .find(|(name, _)| *name == f)
                .map_or(f, |(_, t)| t);
            let rules = c.rules.iter().filter(|r| r.meta.family == f).collect();
            (title, f, rules)
        })
        .collect()
}

fn rule(out: &mut String, r: &Rule) {
    let m = &r.meta;
    // An explicit anchor: heading slugs differ between Markdown renderers.
    let _ = write!(
        out,
        "\n<a id=\"{}\"></a>\n\n### {}\n\n",
        attribute(&m.id),
        text(&m.id)
    );
    let _ = writeln!(out, "**{}** · dialect {}\n", m.severity, text(&m.dialect));
    let _ = writeln!(out, "{}\n", text(&m.summary));
    for paragraph in paragraphs(&m.explain) {
        let _ = writeln!(out, "{}\n", text(&paragraph));
    }
    let spec = match m.spec.strip_prefix("docs/protocol.md") {
        Some(rest) => format!("[protocol.md](protocol.md){}", text(rest)),
        None => text(&m.spec),
    };
    let _ = writeln!(out, "*Spec:* {spec}");
}

/// The explanation's lines joined into paragraphs; an example starts one
/// of its own.
fn paragraphs(explain: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in explain.lines().map(str::trim).filter(|l| !l.is_empty()) {
        match out.last_mut() {
            Some(p) if !line.starts_with("Example") => {
                p.push(' ');
                p.push_str(line);
            }
            _ => out.push(line.to_string()),
        }
    }
    out
}

/// An id as an HTML attribute value.
fn attribute(id: &str) -> String {
    id.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
}

/// Header text as Markdown that shows it as written: characters that would
/// start emphasis, code, links, HTML or a table cell are escaped.
fn text(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    for (i, &ch) in chars.iter().enumerate() {
        let escape = match ch {
            '\\' | '*' | '`' | '[' | ']' | '<' | '>' | '|' => true,
            // Inside a word (task_id) an underscore is plain text.
            '_' => {
                let word = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric());
                !(i > 0 && word(chars.get(i - 1)) && word(chars.get(i + 1)))
            }
            // A line of a paragraph never starts with one, so only the
            // first character could open a heading or a list.
            '#' | '-' | '+' => i == 0,
            _ => false,
        };
        if escape {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_text_shows_as_written() {
        assert_eq!(text("task.* events"), r"task.\* events");
        assert_eq!(text("a | b"), r"a \| b");
        assert_eq!(text("task_id and state_*"), r"task_id and state\_\*");
        assert_eq!(text("_lead"), r"\_lead");
        assert_eq!(text("--horizon applies"), r"\--horizon applies");
        assert_eq!(text("<b>"), r"\<b\>");
    }

    #[test]
    fn examples_start_a_paragraph() {
        assert_eq!(
            paragraphs("Fires when\nit does.\nExample: a\nb."),
            ["Fires when it does.", "Example: a b."]
        );
    }

    #[test]
    fn every_family_of_the_built_in_rules_has_a_heading() {
        let c = Catalog::embedded().unwrap();
        for f in c.families() {
            assert!(
                FAMILIES.iter().any(|(name, _)| *name == f),
                "family {f} has no heading in FAMILIES"
            );
        }
    }
}
