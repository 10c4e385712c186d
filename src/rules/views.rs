//! Registering the catalog's views in a session: planned as they are, or
//! computed once and kept (in memory, in files on disk, or written by a
//! cluster's executors), as each view asks and the audit allows.

use super::catalog::{self, Catalog};
use datafusion::datasource::MemTable;
use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;
use std::sync::{Arc, Mutex};

/// Where the views marked `-- materialize: true` are computed to.
#[derive(Clone)]
pub enum Materialize {
    /// Nowhere: every view stays plain (on a cluster, where a client-side
    /// table cannot be shipped to executors).
    Never,
    /// Batches held in memory (an audit of a loaded log).
    InMemory,
    /// Parquet files in a directory (an in-place audit, whose memory is for
    /// the query operators: at 6 GB the views held in memory were 1-2 GB).
    OnDisk(Arc<ViewFiles>),
    /// Parquet files that the cluster's executors write to a directory on
    /// the shared storage and read back (a cluster audit): each view is
    /// computed once, not once per rule that reads it. The directory goes
    /// when the last clone is dropped, or on an interrupt.
    #[cfg(feature = "cluster")]
    OnCluster(Arc<crate::cluster::Scratch>),
}

/// The files of views materialized on disk. They are temp files: removed
/// when this is dropped, or by an interrupt.
pub struct ViewFiles {
    dir: std::path::PathBuf,
    kept: Mutex<Vec<crate::signals::Temp>>,
}

impl ViewFiles {
    pub fn in_dir(dir: std::path::PathBuf) -> Self {
        ViewFiles {
            dir,
            kept: Mutex::default(),
        }
    }
}

/// Register the catalog's views in order; a view that fails is reported,
/// not fatal (the rules that use it fail and are reported by name too).
pub async fn register_views(
    ctx: &SessionContext,
    catalog: &Catalog,
    materialize: &Materialize,
) -> Vec<(String, String)> {
    let mut errors = Vec::new();
    for v in &catalog.views {
        if let Err(e) = register_view(ctx, v, materialize).await {
            errors.push((v.file.clone(), e.to_string()));
        }
    }
    errors
}

/// Plan one view and register it, computed and kept when it asks to be.
pub(super) async fn register_view(
    ctx: &SessionContext,
    v: &catalog::View,
    materialize: &Materialize,
) -> datafusion::error::Result<()> {
    let started = std::time::Instant::now();
    let result = async {
        let df = crate::read_only::plan(ctx, &v.sql).await?;
        match materialize {
            Materialize::InMemory if v.native => {
                let schema = df.schema().inner().clone();
                let batches = match v.name.as_str() {
                    "tasks" => super::tasks_view::tasks(ctx, &schema).await?,
                    "irregular_transitions" => {
                        super::transitions_view::irregular_transitions(ctx, &schema).await?
                    }
                    other => {
                        return Err(DataFusionError::Plan(format!(
                            "view {other} has no form in Rust"
                        )));
                    }
                };
                let table = MemTable::try_new(schema, vec![batches])?;
                ctx.register_table(&v.name, Arc::new(table)).map(drop)
            }
            Materialize::InMemory if v.materialize => {
                let planned = df.schema().inner().clone();
                let batches = df.collect().await?;
                // The batches may be stricter about nulls than the plan
                // (e.g. a window over a non-null column); keep theirs.
                let schema = batches.first().map_or(planned, |b| b.schema());
                let table = MemTable::try_new(schema, vec![batches])?;
                ctx.register_table(&v.name, Arc::new(table)).map(drop)
            }
            Materialize::OnDisk(files) if v.materialize => {
                write_view(ctx, &v.name, df, files).await
            }
            #[cfg(feature = "cluster")]
            Materialize::OnCluster(scratch) if v.materialize => {
                scratch.write_view(ctx, &v.name, df, VIEW_ROW_GROUP).await
            }
            _ => ctx.register_table(&v.name, df.into_view()).map(drop),
        }
    }
    .await;
    crate::progress::timing("view", &v.name, started);
    result
}

/// Stream a view's rows into a Parquet temp file and register the file
/// under the view's name.
async fn write_view(
    ctx: &SessionContext,
    name: &str,
    df: datafusion::dataframe::DataFrame,
    files: &ViewFiles,
) -> datafusion::error::Result<()> {
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::basic::Compression;
    use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};
    use futures::StreamExt;
    let failed = |e: std::io::Error| {
        DataFusionError::Execution(format!(
            "cannot write view {name} in {}: {e} (choose another --spill-dir)",
            files.dir.display()
        ))
    };
    let temp = crate::signals::temp_in(&files.dir).map_err(failed)?;
    let out = std::io::BufWriter::new(temp.reopen().map_err(failed)?);
    // Read back a few times, from the page cache: no compression, no
    // dictionaries, no statistics (at 6 GB in place this wrote and read
    // fastest, and Arrow IPC files were slower and held more memory); row
    // groups small enough to scan in parallel and to buffer cheaply.
    let props = WriterProperties::builder()
        .set_compression(Compression::UNCOMPRESSED)
        .set_dictionary_enabled(false)
        .set_statistics_enabled(EnabledStatistics::None)
        .set_max_row_group_row_count(Some(VIEW_ROW_GROUP))
        .build();
    let written: datafusion::error::Result<()> = async {
        let mut rows = df.execute_stream().await?;
        let mut writer = ArrowWriter::try_new(out, rows.schema(), Some(props))?;
        while let Some(batch) = rows.next().await {
            writer.write(&batch?)?;
        }
        writer.close()?;
        Ok(())
    }
    .await;
    // A failed write (a full disk) names the directory; a failed query
    // stays as it is.
    written.map_err(|e| match e.to_string() {
        m if m.contains("os error") => DataFusionError::Execution(format!(
            "cannot write view {name} in {}: {m} (choose another --spill-dir)",
            files.dir.display()
        )),
        _ => e,
    })?;
    let path = temp.path().to_str().map(str::to_owned).ok_or_else(|| {
        DataFusionError::Execution(format!(
            "cannot read view {name} back from {}: the path is not UTF-8 (choose another --spill-dir)",
            files.dir.display()
        ))
    })?;
    files
        .kept
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(temp);
    let options = datafusion::prelude::ParquetReadOptions::default().file_extension(".tmp");
    ctx.register_parquet(name, &path, options).await
}

/// Rows per row group of a view written to disk.
const VIEW_ROW_GROUP: usize = 64 * 1024;
