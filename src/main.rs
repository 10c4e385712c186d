//! hvaudit command line: parse, run one subcommand, map the outcome to an
//! exit code (0 clean, 1 findings at or above --fail-on, 2 usage or input
//! error).

use clap::Parser;
use hvaudit::cli::{Cli, Command};
use hvaudit::commands;
use std::process::ExitCode;

// Arrow allocates many large buffers; mimalloc reuses freed pages instead of
// returning them to the kernel and faulting fresh zeroed ones back in.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let quiet = cli.quiet;
    let outcome = match cli.command {
        Command::Audit(a) => commands::audit::run(a, quiet),
        Command::Sql(a) => commands::sql::run(a, quiet),
        Command::Convert(a) => commands::convert::run(a, quiet),
        Command::Rules { action } => commands::rules::run(action),
        Command::Synth(a) => commands::synth::run(a, quiet),
        Command::Replay(a) => commands::replay::run(a, quiet),
        #[cfg(feature = "cluster")]
        Command::Scheduler(a) => commands::cluster::scheduler(a),
        #[cfg(feature = "cluster")]
        Command::Executor(a) => commands::cluster::executor(a),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("hvaudit: {e:#}");
            ExitCode::from(2)
        }
    }
}
