//! `convert`'s Parquet layout: how the normalized tables are laid out as
//! Parquet files ([`mod@write`]); they are read back, loaded or in place, by
//! `ingest::parquet` and `ingest::in_place`.

pub mod write;

pub use write::{SHARD_SHIFT, is_object_url, write_tables};
