//! Interrupts: SIGINT and SIGTERM kill the process without running
//! destructors, so the temp files of atomic writes (`.hvaudit-*.tmp`) would
//! be left behind. Every temp file is created through [`temp_in`], which
//! registers it; a handler thread removes the registered files and exits
//! with 130 (SIGINT) or 143 (SIGTERM), as a shell reports a killed process.
//!
//! One lock guards the registry: creating and registering a temp file,
//! renaming it into place and unregistering it, and the handler's cleanup
//! each happen under it, so a signal never finds a file half accounted for,
//! and nothing is created or renamed once the cleanup has begun.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, Once};

static TEMPS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static INSTALL: Once = Once::new();

/// Clean-ups of things that are not local files (a cluster audit's views
/// under an object-store prefix), run by the handler too.
type Cleanup = Box<dyn Fn() + Send>;
static CLEANUPS: Mutex<Vec<(u64, Cleanup)>> = Mutex::new(Vec::new());

/// Run `cleanup` if an interrupt comes before [`forget_cleanup`] with the
/// id returned.
pub fn on_interrupt(cleanup: Cleanup) -> u64 {
    install();
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    CLEANUPS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((id, cleanup));
    id
}

/// Drop the clean-up registered as `id` (its owner cleaned up itself).
pub fn forget_cleanup(id: u64) {
    CLEANUPS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|(i, _)| *i != id);
}

fn registry() -> MutexGuard<'static, Vec<PathBuf>> {
    // A panic while holding the lock leaves the list usable.
    TEMPS.lock().unwrap_or_else(|e| e.into_inner())
}

/// For a process that embeds hvaudit and handles interrupts itself (the
/// Python module): [`install`] does nothing from now on, so no handler
/// exits the host process; temp files are still removed as their owners
/// drop them. Call it before anything creates a temp file.
pub fn leave_interrupts_to_host() {
    INSTALL.call_once(|| {});
}

/// Install the SIGINT/SIGTERM handler (once; later calls do nothing). If the
/// handler cannot be installed the signals keep their default action.
pub fn install() {
    INSTALL.call_once(|| {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
            return;
        };
        let spawned = std::thread::Builder::new()
            .name("hvaudit-signals".into())
            .spawn(move || {
                if let Some(sig) = signals.forever().next() {
                    for (_, cleanup) in CLEANUPS.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                        cleanup();
                    }
                    let temps = registry();
                    for p in temps.iter() {
                        if p.is_dir() {
                            let _ = std::fs::remove_dir_all(p);
                        } else {
                            let _ = std::fs::remove_file(p);
                        }
                    }
                    // Still holding the lock: no new temp file can appear.
                    std::process::exit(128 + sig);
                }
            });
        drop(spawned);
    });
}

/// A `.hvaudit-*.tmp` file that an interrupt removes. Dropped without
/// [`Temp::persist`], it is deleted (and unregistered).
pub struct Temp {
    file: Option<tempfile::NamedTempFile>,
    path: PathBuf,
}

/// Create a registered temp file in `dir` (the target's directory, so the
/// final rename stays on one file system). Its mode is 0666 less the umask,
/// as for any file a command creates. The name says which host and process
/// made it, so that a later run can remove what a killed one left
/// ([`sweep_stale`]).
pub fn temp_in(dir: &Path) -> io::Result<Temp> {
    use std::os::unix::fs::PermissionsExt;
    install();
    let mut temps = registry();
    let file = tempfile::Builder::new()
        .prefix(&format!(
            "{TEMP_PREFIX}{}-{}-",
            host_tag(),
            std::process::id()
        ))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)?;
    let path = file.path().to_path_buf();
    temps.push(path.clone());
    Ok(Temp {
        file: Some(file),
        path,
    })
}

impl Temp {
    pub fn as_file(&self) -> &File {
        self.file.as_ref().expect("temp file present").as_file()
    }

    /// A second handle to the file (for writers that take ownership).
    pub fn reopen(&self) -> io::Result<File> {
        self.file.as_ref().expect("temp file present").reopen()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Rename the file to `to`, replacing it; it is no longer removed on an
    /// interrupt. On error the temp file is deleted.
    pub fn persist(self, to: &Path) -> io::Result<()> {
        self.persist_locked(to, &mut registry())
    }

    /// `persist` with the registry already locked. Leaves `self` empty, so
    /// that dropping it does not lock again.
    fn persist_locked(mut self, to: &Path, temps: &mut Vec<PathBuf>) -> io::Result<()> {
        let file = self.file.take().expect("temp file present");
        let result = file.persist(to).map(drop).map_err(|e| {
            drop(e.file); // deletes it
            e.error
        });
        unregister(temps, &self.path);
        result
    }

    /// Delete the file, with the registry already locked.
    fn discard_locked(mut self, temps: &mut Vec<PathBuf>) {
        drop(self.file.take());
        unregister(temps, &self.path);
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if self.file.is_none() {
            return; // persisted or discarded
        }
        let mut temps = registry();
        // NamedTempFile deletes the file when dropped.
        drop(self.file.take());
        unregister(&mut temps, &self.path);
    }
}

fn unregister(temps: &mut Vec<PathBuf>, path: &Path) {
    if let Some(at) = temps.iter().position(|p| p == path) {
        temps.swap_remove(at);
    }
}

/// A `.hvaudit-*.tmp` directory that an interrupt removes with all it
/// holds; removed (and unregistered) when dropped. For scratch files: the
/// views a cluster audit has its executors write to shared storage, the
/// Parquet an audit too large for memory reads its log into.
pub struct TempDir {
    path: PathBuf,
}

/// Create a registered temp directory in `dir`, named like [`temp_in`]'s
/// files.
pub fn temp_dir_in(dir: &Path) -> io::Result<TempDir> {
    install();
    let mut temps = registry();
    let made = tempfile::Builder::new()
        .prefix(&format!(
            "{TEMP_PREFIX}{}-{}-",
            host_tag(),
            std::process::id()
        ))
        .suffix(".tmp")
        .tempdir_in(dir)?;
    let path = made.keep();
    temps.push(path.clone());
    Ok(TempDir { path })
}

impl TempDir {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let mut temps = registry();
        let _ = std::fs::remove_dir_all(&self.path);
        unregister(&mut temps, &self.path);
    }
}

/// Rename a set of temp files into place as one step as far as interrupts
/// go: a signal during the renames waits until they are all done, so a set
/// of outputs is never left half renamed. After a failed rename the rest
/// are deleted.
pub fn persist_all<'a>(files: impl IntoIterator<Item = (Temp, &'a Path)>) -> io::Result<()> {
    let mut temps = registry();
    let mut result = Ok(());
    for (tmp, to) in files {
        if result.is_err() {
            tmp.discard_locked(&mut temps);
            continue;
        }
        result = tmp
            .persist_locked(to, &mut temps)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot write {}: {e}", to.display())));
    }
    result
}

const TEMP_PREFIX: &str = ".hvaudit-";

/// A short tag for this host (temp files on shared storage may come from
/// several machines, each with its own process ids).
fn host_tag() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    format!(
        "{:08x}",
        xxhash_rust::xxh3::xxh3_64(host.trim().as_bytes()) as u32
    )
}

/// Temp files found in a directory that a run of ours left behind.
#[derive(Debug, Default)]
pub struct Stale {
    /// Left by a process of this host that no longer runs: removed.
    pub removed: Vec<PathBuf>,
    /// Left by another host, or not named by host and process: kept.
    /// (Those of live processes here are neither removed nor listed.)
    pub kept: Vec<PathBuf>,
}

/// Remove the `.hvaudit-*.tmp` files and directories directly in `dir`
/// that a process of this host left and that no longer runs (SIGKILL, a power cut: nothing
/// could clean up). Those of other hosts (shared storage) are kept and
/// listed.
pub fn sweep_stale(dir: &Path) -> Stale {
    let mut out = Stale::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let ours = format!("{TEMP_PREFIX}{}-", host_tag());
    let mut names: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    names.sort();
    for path in names {
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        // Files, and scratch directories (a cluster audit's views, an
        // audit's converted log).
        let dir = path.is_dir();
        if !(name.starts_with(TEMP_PREFIX) && name.ends_with(".tmp") && (dir || path.is_file())) {
            continue;
        }
        let pid = name
            .strip_prefix(&ours)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        match pid {
            Some(pid) if pid == std::process::id() => {}
            Some(pid) if Path::new(&format!("/proc/{pid}")).exists() => {}
            Some(_) => {
                let removed = if dir {
                    std::fs::remove_dir_all(&path)
                } else {
                    std::fs::remove_file(&path)
                };
                if removed.is_ok() {
                    out.removed.push(path);
                }
            }
            None => out.kept.push(path),
        }
    }
    out
}

/// The temp files an interrupt would remove now (for tests).
pub fn registered() -> Vec<PathBuf> {
    registry().clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_files_are_registered_until_persisted_or_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let kept = temp_in(dir.path()).unwrap();
        let dropped = temp_in(dir.path()).unwrap();
        let (kp, dp) = (kept.path().to_path_buf(), dropped.path().to_path_buf());
        assert!(registered().contains(&kp) && registered().contains(&dp));
        assert!(kp.file_name().unwrap().to_string_lossy().ends_with(".tmp"));
        drop(dropped);
        assert!(!dp.exists() && !registered().contains(&dp));
        let target = dir.path().join("out.txt");
        kept.persist(&target).unwrap();
        assert!(target.exists() && !kp.exists());
        assert!(!registered().contains(&kp));
    }

    #[test]
    fn a_failed_rename_deletes_the_set_without_deadlock() {
        let dir = tempfile::tempdir().unwrap();
        let a = temp_in(dir.path()).unwrap();
        let b = temp_in(dir.path()).unwrap();
        let paths = [a.path().to_path_buf(), b.path().to_path_buf()];
        let nowhere = dir.path().join("missing/a.out");
        let fine = dir.path().join("b.out");
        let err = persist_all([(a, nowhere.as_path()), (b, fine.as_path())]).unwrap_err();
        assert!(err.to_string().contains("missing/a.out"), "{err}");
        for p in &paths {
            assert!(!p.exists() && !registered().contains(p));
        }
        assert!(!fine.exists(), "nothing renamed after a failure");
        // A failed single rename deletes its temp file too.
        let c = temp_in(dir.path()).unwrap();
        let cp = c.path().to_path_buf();
        assert!(c.persist(&nowhere).is_err());
        assert!(!cp.exists() && !registered().contains(&cp));
    }
}
