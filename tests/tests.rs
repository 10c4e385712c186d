//! One integration test binary (one link of DataFusion), modules per area.

mod adversarial;
mod browser;
mod cli;
mod cli_output;
#[cfg(feature = "cluster")]
mod cluster;
mod common;
mod completions;
mod convert_lock;
mod docs;
mod docs_commands;
mod ev_table;
mod evidence;
mod findings_parquet;
mod fixtures_outcome;
mod forced_plans;
mod gate;
mod ingest;
mod module_graph;
mod object_storage;
mod order_ns;
mod outputs;
mod properties;
mod replay;
mod report;
mod roundtrip;
mod rule_cases;
mod rules_flow;
mod rules_shape;
mod spill;
mod sql_output;
mod sql_shell;
mod synth;
mod trust;
mod user_rules;
mod well_formed;
