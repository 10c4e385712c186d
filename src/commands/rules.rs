//! `hvaudit rules list | explain | lint`.

use crate::audit::block_on;
use crate::cli::{RulesAction, RulesListFormat};
use crate::engine::{self, EngineOptions, RuleSettings};
use crate::ingest::Ingested;
use crate::rules::{self, catalog::Catalog};

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
            crate::output::to_stdout(|w| Ok(w.write_all(text.as_bytes())?))?;
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

/// Headers parse, and every rule (built-in and the directory's) plans
/// against empty tables.
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
        for (file, e) in rules::register_views(&ctx, &c, &rules::Materialize::InMemory).await {
            println!("error: view {file}: {e}");
            failed += 1;
        }
        for r in &c.rules {
            match ctx.sql(&r.sql).await {
                Ok(_) => println!("ok    {} ({})", r.meta.id, r.file),
                Err(e) => {
                    println!("error: {}: {e}", r.file);
                    failed += 1;
                }
            }
        }
        Ok::<_, anyhow::Error>(failed)
    })?;
    Ok(u8::from(failed > 0))
}
