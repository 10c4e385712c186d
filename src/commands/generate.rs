//! `hvaudit completions SHELL` and `hvaudit man`: written from the clap
//! definitions of `cli.rs`, so they list exactly the options the binary
//! takes.

use crate::cli::Cli;
use clap::CommandFactory;
use hvaudit::output::{to_stdout, write_output};
use std::path::{Path, PathBuf};

/// The completion script for `shell` on standard output.
pub fn completions(shell: clap_complete::Shell) -> anyhow::Result<u8> {
    let mut cmd = Cli::command();
    let name = cmd.get_name().to_string();
    to_stdout(|w| {
        clap_complete::generate(shell, &mut cmd, name, w);
        Ok(())
    })?;
    Ok(0)
}

/// The man page of `hvaudit` on standard output, or with `dir` the pages
/// of every command written there (each replaced atomically).
pub fn man(dir: Option<&Path>) -> anyhow::Result<u8> {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    // Built, every subcommand has its display name (hvaudit-rules-list).
    cmd.build();
    match dir {
        None => to_stdout(|w| Ok(clap_mangen::Man::new(cmd).render(w)?))?,
        Some(dir) => {
            man_pages(&cmd, dir)?;
        }
    }
    Ok(0)
}

/// Write the page of `cmd` and of each of its subcommands into `dir`.
fn man_pages(cmd: &clap::Command, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if !dir.is_dir() {
        anyhow::bail!(
            "--dir {}: not a directory; create it first",
            hvaudit::ingest::inputs::shown_path(dir)
        );
    }
    let mut written = Vec::new();
    let mut todo = vec![cmd.clone()];
    while let Some(cmd) = todo.pop() {
        todo.extend(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
        let page = clap_mangen::Man::new(cmd);
        let path = dir.join(page.get_filename());
        write_output(&path, |w| Ok(page.render(w)?))?;
        written.push(path);
    }
    written.sort();
    Ok(written)
}
