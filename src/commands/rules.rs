//! `hvaudit rules list | explain | lint | test`.

use crate::cli::{RulesAction, RulesListFormat};
use hvaudit::audit::block_on;
use hvaudit::engine::{self, EngineOptions, RuleSettings};
use hvaudit::ingest::Ingested;
use hvaudit::rule_cases::{self as cases, Outcome};
use hvaudit::rules::{self, catalog::Catalog};

pub fn run(action: RulesAction, config: &crate::config::Config) -> anyhow::Result<u8> {
    match action {
        RulesAction::List {
            rules_dir,
            selection,
            format,
        } => {
            let mut c = Catalog::embedded().map_err(errors)?;
            if let Some(d) = rules_dir {
                c.add_dir(&d).map_err(errors)?;
            }
            c.apply_overrides(&config.rules, |c| {
                c.select(
                    selection.rules.as_deref(),
                    selection.exclude_rules.as_deref(),
                )
            })
            .map_err(anyhow::Error::msg)?;
            let text = match format {
                RulesListFormat::Md => rules::reference::markdown(&c),
                RulesListFormat::Text => c
                    .rules
                    .iter()
                    .map(|r| {
                        format!(
                            "{:<38} {:<8} {:<4} {}\n",
                            r.meta.id, r.meta.severity, r.meta.dialect, r.meta.summary
                        )
                    })
                    .collect(),
            };
            hvaudit::output::to_stdout(|w| Ok(w.write_all(text.as_bytes())?))?;
            Ok(0)
        }
        RulesAction::Explain { id } => {
            let c = Catalog::embedded().map_err(errors)?;
            let Some(r) = c.rule(&id) else {
                anyhow::bail!("no rule {id:?}; see `hvaudit rules list`");
            };
            let m = &r.meta;
            println!(
                "{}  ({}, {}, dialect {})\n",
                m.id, m.severity, m.family, m.dialect
            );
            println!("{}\n", m.summary);
            println!("{}\n", m.explain);
            println!("Spec: {}", m.spec);
            println!("Every rule: docs/rules.md (`hvaudit rules list --format md`)");
            Ok(0)
        }
        RulesAction::Lint { dir } => lint(&dir),
        RulesAction::Test { dir, bless } => test(&dir, bless),
    }
}

fn errors(e: Vec<rules::catalog::FileError>) -> anyhow::Error {
    anyhow::anyhow!(
        e.iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    )
}

/// Headers parse, every file is one query, and every rule (built-in and
/// the directory's) plans against empty tables. Nothing runs: views are
/// registered as plain views (none is computed) and queries are only
/// planned, read-only.
fn lint(dir: &std::path::Path) -> anyhow::Result<u8> {
    let mut c = Catalog::embedded().map_err(errors)?;
    if let Err(e) = c.add_dir(dir) {
        for err in &e {
            println!("error: {err}");
        }
        return Ok(1);
    }
    let empty = Ingested::default();
    let failed = block_on(async {
        let ctx = engine::session(&EngineOptions::default())?;
        engine::register_tables(&ctx, &empty)?;
        engine::register_settings(&ctx, &RuleSettings::default())?;
        let mut failed = 0;
        for (file, e) in rules::register_views(&ctx, &c, &rules::Materialize::Never).await {
            println!("error: view {file}: {e}");
            failed += 1;
        }
        for r in &c.rules {
            match hvaudit::read_only::plan(&ctx, &r.sql).await {
                Ok(_) => println!("ok    {} ({})", r.meta.id, r.file),
                Err(e) => {
                    println!("error: {}: {e}", r.file);
                    failed += 1;
                }
            }
        }
        Ok::<_, anyhow::Error>(failed)
    })?;
    let mut own = Catalog::default();
    if own.add_dir(dir).is_ok() {
        let ids: Vec<&str> = own.rules.iter().map(|r| r.meta.id.as_str()).collect();
        for id in cases::untested(dir, &ids) {
            println!(
                "note: {id} has no test case ({}/{}/{id}/CASE.ndjson; see `hvaudit rules test`)",
                dir.display(),
                cases::TESTS_DIR
            );
        }
    }
    Ok(u8::from(failed > 0))
}

/// Audit every case of `dir/tests` with its rule and compare the findings
/// with the expected ones (with `bless`, write them): 0 when all pass, 1
/// when one fails, 2 when the directory cannot be tested.
fn test(dir: &std::path::Path, bless: bool) -> anyhow::Result<u8> {
    let mut c = Catalog::embedded().map_err(errors)?;
    c.add_dir(dir).map_err(errors)?;
    let ids: Vec<&str> = c.rules.iter().map(|r| r.meta.id.as_str()).collect();
    let all = cases::cases(dir, &ids).map_err(anyhow::Error::msg)?;
    let mut failed = 0;
    for case in &all {
        let label = case.label();
        match cases::run(case, dir, bless) {
            Ok(Outcome::Passed) => println!("ok      {label}"),
            Ok(Outcome::Blessed) => println!("blessed {label}"),
            Ok(Outcome::NoExpected) => {
                failed += 1;
                println!(
                    "FAILED  {label}: no {}; write it with --bless",
                    case.expected.display()
                );
            }
            Ok(Outcome::Failed(diff)) => {
                failed += 1;
                println!("FAILED  {label}: the findings differ\n{diff}");
            }
            Err(e) => {
                failed += 1;
                println!("FAILED  {label}: {e}");
            }
        }
    }
    println!(
        "{} case(s): {} passed, {failed} failed",
        all.len(),
        all.len() - failed
    );
    Ok(u8::from(failed > 0))
}
