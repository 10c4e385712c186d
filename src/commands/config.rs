//! `hvaudit config show`: the configuration file in effect, every `audit`
//! option with its value and where it comes from, and the rule entries.

use crate::cli::ConfigAction;
use std::path::PathBuf;

pub fn run(action: ConfigAction, given: &(Option<PathBuf>, bool)) -> anyhow::Result<u8> {
    let ConfigAction::Show = action;
    let (file, no_config) = given;
    let (options, config) = crate::config::effective("audit", file.as_deref(), *no_config)
        .map_err(|e| match e {
            crate::config::ArgsError::Config(m) => anyhow::anyhow!(m),
            crate::config::ArgsError::Clap(e) => anyhow::anyhow!(e.to_string()),
        })?;
    match (&config.file, config.found) {
        (Some(f), Some(found)) => println!("configuration file: {f} ({})", found.as_str()),
        _ => println!(
            "configuration file: none (no ./{} here; --config FILE or {} names one)",
            crate::config::DEFAULT_FILE,
            crate::config::ENV_VAR
        ),
    }
    println!("\n[audit]");
    let width = options.iter().map(|(k, _, _)| k.len()).max().unwrap_or(0);
    for (key, value, source) in &options {
        println!("  {key:<width$} = {value}  ({source})");
    }
    if !config.rules.is_empty() {
        println!("\n[rules]");
        for r in &config.rules {
            let mut said = Vec::new();
            if let Some(s) = r.severity {
                said.push(format!("severity {s}"));
            }
            if !r.enabled {
                said.push("left out".to_string());
            }
            println!("  {:<38} {}", r.pattern, said.join(", "));
        }
    }
    Ok(0)
}
