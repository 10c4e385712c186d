//! hvaudit command line: parse, run one subcommand, map the outcome to an
//! exit code (0 clean, 1 findings at or above --fail-on, 2 usage or input
//! error).

use clap::Parser;
use hvaudit::cli::{Cli, Command};
use hvaudit::commands;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let quiet = cli.quiet;
    let outcome = match cli.command {
        Command::Audit(a) => commands::audit::run(a, quiet),
        Command::Sql(a) => commands::sql::run(a, quiet),
        Command::Convert(a) => commands::convert::run(a, quiet),
        Command::Rules { action } => commands::rules::run(action),
        Command::Synth(a) => commands::synth::run(a, quiet),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("hvaudit: {e:#}");
            ExitCode::from(2)
        }
    }
}
