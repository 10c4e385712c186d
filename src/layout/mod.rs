//! `convert`'s Parquet layout, written and read where it lies: how the
//! normalized tables are laid out as Parquet files ([`mod@write`]), and
//! those files registered in a session as tables that every query scans
//! from disk ([`in_place`]: `audit --in-place`, a spilled run, a cluster).
//! A loaded read of them goes through `ingest::parquet`, as any Parquet
//! log does.

pub mod in_place;
pub mod write;

pub use write::{SHARD_SHIFT, is_object_url, write_tables};
