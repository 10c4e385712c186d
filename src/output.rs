//! Writing output files atomically: a temp file in the same directory,
//! renamed over the target only when everything was written. An error, a
//! panic or an interrupt (SIGINT/SIGTERM) leaves no temp file behind.

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
    // Registered, so that an interrupt removes it too (see signals.rs).
    let tmp = crate::signals::temp_in(dir).map_err(|e| {
        anyhow::anyhow!(
            "cannot write in {}: {e}; check the directory exists and is writable",
            dir.display()
        )
    })?;
    {
        let mut w = BufWriter::new(tmp.as_file());
        fill(&mut w)?;
        w.flush()?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    Ok(())
}
