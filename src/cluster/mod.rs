//! The same audit and SQL on an Apache DataFusion Ballista cluster.
//!
//! The work splits in three: `convert` ingests and normalizes (per shard, on
//! any machine) into Parquet on storage every executor can read; the client
//! here registers those files as the `events`, `evidence` and `bad_lines`
//! tables and plans the same rule SQL, which the cluster executes; the
//! report is rendered on the client. The rules use built-in functions only,
//! so stock scheduler and executor binaries run them. `hvaudit scheduler`
//! and `hvaudit executor` are the same servers with the JSON functions added,
//! for ad hoc SQL over `payload` on the cluster.
//!
//! The files: the client session (`client`), the audit around the rules
//! (`audit`), the place the executors write the views to (`scratch`), the
//! scheduler and executor (`servers`), and how a run stalls or is
//! disturbed (`failures`). All but `failures` come with the `cluster`
//! feature. The module is below the audit, the rules and the tables, which
//! call it; it names none of them.

#[cfg(feature = "cluster")]
mod audit;
#[cfg(feature = "cluster")]
mod client;
mod failures;
#[cfg(feature = "cluster")]
mod scratch;
#[cfg(feature = "cluster")]
mod servers;

#[cfg(feature = "cluster")]
pub use crate::layout::in_place::{ParquetInputs, register_tables, scan_inputs};
#[cfg(feature = "cluster")]
pub use audit::{AuditFailure, audit, session};
#[cfg(feature = "cluster")]
pub use client::{connect, scheduler_address};
pub use failures::{Disturbed, Stalled, disturbance, humanize, within};
#[cfg(feature = "cluster")]
pub use scratch::{Scratch, scratch, scratch_parent};
#[cfg(feature = "cluster")]
pub use servers::{
    EXECUTOR_TIMEOUT, ExecutorOptions, free_port, run_executor, run_scheduler, run_scheduler_with,
    start_in_process, start_scheduler_in_process,
};
