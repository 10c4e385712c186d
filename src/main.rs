//! The hvaudit binary: parse the command line and the configuration file
//! (`cli`, `config`), set the process up (the allocator's page purging,
//! the object stores' endpoint), run one subcommand (`commands`, a file
//! each: the arguments translated into the library's options by
//! `translate`, the library called, its result rendered), and map the
//! outcome to an exit code (0 clean, 1 findings at or above --fail-on, 2
//! usage or input error).
//!
//! These four modules are the binary's own, not the library's: the
//! compiler then reports whatever in them nothing uses.

use cli::Command;
use std::process::ExitCode;

mod cli;
mod commands;
mod config;
mod translate;

// Arrow allocates many large buffers; mimalloc reuses freed pages instead of
// returning them to the kernel and faulting fresh zeroed ones back in. It is
// built without transparent huge pages (feature no_thp): the kernel's
// clearing of fresh 2 MB pages cost a 1 GB ingest 2.9-4.1 s of system time
// against 0.8-1.2 s with 4 KB pages, and held 1.87 GB against 1.63 GB.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc's option enum (the same in v2 and v3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() -> ExitCode {
    hvaudit::progress::start_clock();
    let (cli, config) = match config::parse_command_line(std::env::args_os()) {
        Ok(parsed) => parsed,
        Err(config::ArgsError::Clap(e)) => e.exit(),
        Err(config::ArgsError::Config(e)) => {
            eprintln!("hvaudit: {e}");
            return ExitCode::from(2);
        }
    };
    // Which configuration file applies, or which was passed over and why:
    // said even under --quiet.
    if let Some(notice) = &config.notice {
        eprintln!("{notice}");
    }
    // Without a memory limit, never hand freed pages back to the kernel: a
    // query phase frees and allocates gigabytes, and each page given back is
    // faulted and zeroed again on reuse (a 1 GB audit: 75-90 k page faults
    // down to 16 k, a second of system time; peak RSS within 2%). Under a
    // limit, memory is given back as usual: keeping every phase's pages
    // raised the 6 GB in-place audit's peak RSS from 6.5 to 6.8-7.1 GiB.
    if cli.memory_limit().is_none() {
        // SAFETY: sets a process-wide allocator option; no memory is involved.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    }
    if let Some(input) = cli.input() {
        hvaudit::object_storage::configure(hvaudit::object_storage::StoreOptions {
            endpoint: input.endpoint.clone(),
        });
    }
    let quiet = cli.quiet;
    let cli_config = (cli.config.clone(), cli.no_config);
    let outcome = match cli.command {
        Command::Audit(a) => commands::audit::run(a, &config, quiet),
        Command::Sql(a) => commands::sql::run(a, quiet),
        Command::Convert(a) => commands::convert::run(a, quiet),
        Command::Rules { action } => commands::rules::run(action, &config),
        Command::Synth(a) => commands::synth::run(a, quiet),
        Command::Replay(a) => commands::replay::run(a, quiet),
        Command::Diff(a) => commands::diff::run(a),
        Command::Config { action } => commands::config::run(action, &cli_config),
        Command::Completions { shell } => commands::generate::completions(shell),
        Command::Man { dir } => commands::generate::man(dir.as_deref()),
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
