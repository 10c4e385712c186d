//! Where a cluster run's executors write what they read back: the views
//! computed once, and the rows the client writes for them (ids kept by
//! more than one `convert` run). A hidden temp directory on the shared
//! storage, or a hidden prefix in the object store the inputs are in.

use anyhow::Context;
use datafusion::arrow::array::RecordBatch;
use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;
use std::path::{Path, PathBuf};

/// Where a cluster audit's executors write the views: a directory on a
/// shared filesystem, or a prefix in the object store the inputs are in.
/// The place goes when this is dropped, or on an interrupt.
pub enum Scratch {
    Dir(crate::signals::TempDir),
    Objects(crate::object_storage::TempPrefix),
}

impl Scratch {
    /// Where a view's files go: a directory path or URL ending in `/`.
    fn place(&self, name: &str) -> std::result::Result<String, String> {
        match self {
            Scratch::Dir(dir) => {
                let place = dir.path().join(name);
                // There even when no partition has a row.
                std::fs::create_dir_all(&place).map_err(|e| e.to_string())?;
                place
                    .to_str()
                    .map(|p| format!("{p}/"))
                    .ok_or_else(|| "the path is not UTF-8".to_string())
            }
            Scratch::Objects(prefix) => Ok(format!("{}{name}/", prefix.url())),
        }
    }

    fn shown(&self) -> String {
        match self {
            Scratch::Dir(dir) => dir.path().display().to_string(),
            Scratch::Objects(prefix) => prefix.url().to_string(),
        }
    }

    /// Write `rows` (laid out as `events`) as one Parquet file in a place
    /// named `name`, written from here for the executors to read; where.
    pub fn write_rows(
        &self,
        name: &str,
        rows: &[RecordBatch],
    ) -> datafusion::error::Result<String> {
        use datafusion::parquet::arrow::ArrowWriter;
        let failed = |e: &dyn std::fmt::Display| {
            DataFusionError::Execution(format!(
                "cannot write {name} in {}: {e} (choose another --spill-dir on storage every \
                 executor can write)",
                self.shown()
            ))
        };
        let place = self.place(name).map_err(|e| failed(&e))?;
        let file = format!("{place}part-0.parquet");
        let schema = crate::ingest::schema::EVENTS.clone();
        match self {
            Scratch::Dir(_) => {
                let out = std::fs::File::create(&file).map_err(|e| failed(&e))?;
                let mut writer = ArrowWriter::try_new(out, schema, None)?;
                for b in rows {
                    writer.write(b)?;
                }
                writer.close()?;
            }
            Scratch::Objects(_) => {
                let out =
                    crate::object_storage::ObjectWriter::create(&file).map_err(|e| failed(&e))?;
                let mut writer = ArrowWriter::try_new(out, schema, None)?;
                for b in rows {
                    writer.write(b)?;
                }
                // The object appears only once its upload completes.
                writer.into_inner()?.finish().map_err(|e| failed(&e))?;
            }
        }
        Ok(place)
    }

    /// Have the cluster write a view's rows as Parquet into a place named
    /// `name` (one file per partition of its last stage, written by the
    /// executors, in row groups of `row_group` rows) and register those
    /// files under the view's name.
    pub async fn write_view(
        &self,
        ctx: &SessionContext,
        name: &str,
        df: datafusion::dataframe::DataFrame,
        row_group: usize,
    ) -> datafusion::error::Result<()> {
        use datafusion::config::TableParquetOptions;
        use datafusion::dataframe::DataFrameWriteOptions;
        let path = self.place(name).map_err(|e| {
            DataFusionError::Execution(format!(
                "cannot write view {name} in {}: {e} (choose another --spill-dir on storage \
                 every executor can write)",
                self.shown()
            ))
        })?;
        // As for the views written in place (rules::views::write_view).
        let mut options = TableParquetOptions::default();
        options.global.compression = Some("uncompressed".into());
        options.global.dictionary_enabled = Some(false);
        options.global.statistics_enabled = Some("none".into());
        options.global.max_row_group_size = row_group;
        let schema = df.schema().inner().clone();
        df.write_parquet(&path, DataFrameWriteOptions::new(), Some(options))
            .await?;
        let options = datafusion::prelude::ParquetReadOptions::default().schema(&schema);
        ctx.register_parquet(name, &path, options).await
    }
}

/// Where a cluster run has the executors write the views it computes
/// once: a temp directory in `spill_dir`, or else in the first input (a
/// directory, or a file's directory), on the shared storage. It is hidden,
/// so no later scan of the inputs reads it, and removed when the run ends,
/// fails or is interrupted.
pub fn scratch(spill_dir: Option<&Path>, inputs: &[PathBuf]) -> anyhow::Result<Scratch> {
    if spill_dir.is_none()
        && let Some(url) = inputs
            .first()
            .and_then(|i| i.to_str())
            .filter(|i| crate::object_storage::is_url(i))
    {
        let prefix = crate::object_storage::TempPrefix::near(url)
            .map_err(|e| anyhow::anyhow!("cannot place the views beside {url}: {e}"))?;
        return Ok(Scratch::Objects(prefix));
    }
    let parent = scratch_parent(spill_dir, inputs)?;
    let dir = crate::signals::temp_dir_in(&parent).with_context(|| {
        format!(
            "cannot make a directory for the views in {} (choose one on storage every \
             executor can write with --spill-dir)",
            parent.display()
        )
    })?;
    Ok(Scratch::Dir(dir))
}

/// The directory in which a cluster run makes its views' directory.
pub fn scratch_parent(spill_dir: Option<&Path>, inputs: &[PathBuf]) -> anyhow::Result<PathBuf> {
    let parent = match (spill_dir, inputs.first()) {
        (Some(dir), _) => dir.to_path_buf(),
        (None, Some(input)) if input.is_dir() => input.clone(),
        (None, Some(input)) => input
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf(),
        (None, None) => anyhow::bail!("no inputs"),
    };
    // Executors open it by the path the client gives.
    std::fs::canonicalize(&parent)
        .with_context(|| format!("the views' directory {}", parent.display()))
}
