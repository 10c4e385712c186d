//! How hvaudit encodes every Parquet file it writes as output. Below
//! every writer of one (the report's findings, `convert`'s layout, `sql`
//! results), and depending on none of them.

/// How every Parquet output is written (convert's tables, `sql` results,
/// the findings): zstd at level 3, fast to write and well compressed.
pub fn properties() -> datafusion::parquet::file::properties::WriterPropertiesBuilder {
    use datafusion::parquet::basic::{Compression, ZstdLevel};
    let level = ZstdLevel::try_new(3).expect("3 is a zstd level");
    datafusion::parquet::file::properties::WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
}
