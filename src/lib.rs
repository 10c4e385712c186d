//! hvaudit: audit Harmovela / AEP agent-runtime event logs.
//!
//! The front door: [`audit::Audit`] (an [`audit::AuditConfig`], whose
//! [`tables::ReadingOptions`] say what to read and where the tables go),
//! [`tables::Tables`] for a SQL session over the tables, and
//! [`replay::replay`].
//!
//! The data path: `tables` decides where the tables live (loaded, or read
//! to Parquet on disk when they would not fit in memory, in place, on a
//! cluster); `ingest` reads NDJSON or Parquet into normalized Arrow
//! tables, `engine` registers them with DataFusion, `rules` runs the SQL
//! rule files and turns their rows into `Finding`s, `report` renders them.
//! `cluster` runs the same SQL on a Ballista cluster (feature `cluster`;
//! how a cluster run stalls or is disturbed is there without it).

mod amplifying_functions;
pub mod audit;
pub mod cluster;
pub mod engine;
pub mod escape;
pub mod finding;
pub mod finding_store;
pub mod gate;
pub mod ingest;
pub mod interrupt;
pub mod layout;
pub mod log_format;
pub mod object_storage;
pub mod operator_files;
pub mod output;
pub mod parquet_output;
pub mod progress;
pub mod protocol;
pub mod read_only;
pub mod replay;
pub mod report;
pub mod rule_cases;
pub mod rules;
pub mod signals;
pub mod store_key;
pub mod tables;

pub use audit::{Audit, AuditConfig, AuditError};
pub use finding::{Finding, Location, Severity};
pub use finding_store::{FindingKey, Findings};
pub use report::model::{InputSummary, Report, RuleMeta};
pub use tables::{ReadingOptions, Tables};
