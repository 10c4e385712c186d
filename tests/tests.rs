//! One integration test binary (one link of DataFusion), modules per area.

mod cli;
mod common;
mod ingest;
mod report;
mod roundtrip;
mod rules_flow;
mod rules_shape;
mod synth;
