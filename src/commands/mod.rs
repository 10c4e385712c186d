//! One function per subcommand; each returns the process exit code.

pub mod audit;
#[cfg(feature = "cluster")]
pub mod cluster;
pub mod config;
pub mod convert;
pub mod diff;
pub mod generate;
pub mod replay;
pub mod rules;
pub mod sql;
mod sql_output;
mod sql_shell;
mod sql_statement;
pub mod synth;
