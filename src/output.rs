//! Writing output files atomically: a temp file in the same directory,
//! renamed over the target only when everything was written.

use std::io::{BufWriter, Write};
use std::path::Path;

/// Write `path` through `fill`; on any error nothing is left behind.
pub fn write_atomic<F>(path: &Path, fill: F) -> anyhow::Result<()>
where
    F: FnOnce(&mut dyn Write) -> anyhow::Result<()>,
{
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let tmp = tempfile::Builder::new()
        .prefix(".hvaudit-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot write in {}: {e}; check the directory exists and is writable",
                dir.display()
            )
        })?;
    let mut w = BufWriter::new(tmp);
    fill(&mut w)?;
    let tmp = w.into_inner().map_err(|e| e.into_error())?;
    tmp.as_file().sync_all()?;
    tmp.persist(path)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {}", path.display(), e.error))?;
    Ok(())
}
