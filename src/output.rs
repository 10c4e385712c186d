//! Where outputs go. A regular file (or a new path) is written atomically:
//! a temp file in the same directory, renamed over the target only when
//! everything was written, so an error, a panic or an interrupt
//! (SIGINT/SIGTERM) leaves the old file and no temp file behind. Anything
//! else that already exists at the path (a character device such as
//! /dev/null, a FIFO, a socket, a terminal, `/dev/stdout`) is opened and
//! written in place, as a shell's `>` would: it is never replaced. `-` is
//! standard output. A reader that closes standard output early (`| head`)
//! ends the writing quietly. A regular file gets a MAC beside it (kind
//! output, `store_key`), so that a later walk over its directory knows it
//! for hvaudit's own and does not read it as a log.

use crate::signals::Temp;
use crate::store_key::{Macced, Signed, StoreKey};
use std::fs::{File, OpenOptions, Permissions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Write `path` (or standard output for `-`) through `fill`.
pub fn write_output<F>(path: &Path, fill: F) -> anyhow::Result<()>
where
    F: FnOnce(&mut dyn Write) -> anyhow::Result<()>,
{
    let mut out = Output::create(path)?;
    let filled = fill(out.writer());
    out.close(filled)
}

/// Write standard output through `fill`; a closed pipe is not an error.
pub fn to_stdout<F>(fill: F) -> anyhow::Result<()>
where
    F: FnOnce(&mut dyn Write) -> anyhow::Result<()>,
{
    write_output(Path::new("-"), fill)
}

/// Whether a reader of standard output went away (a broken pipe): further
/// output can be skipped.
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// An output being written; [`Output::finish`] completes it.
pub struct Output {
    sink: Sink,
    shown: String,
}

enum Sink {
    Stdout(Watched<io::StdoutLock<'static>>),
    /// A special file, written where it is.
    Direct(BufWriter<File>),
    /// A regular file: a temp file renamed to `target` at the end.
    Atomic {
        temp: Temp,
        /// Boxed: the hash state is a few KiB.
        writer: Box<BufWriter<Macced<File>>>,
        /// Its MAC is written with this key (none: no key could be had).
        key: Option<StoreKey>,
        target: PathBuf,
        /// The replaced file's mode, kept.
        mode: Option<Permissions>,
    },
}

impl Output {
    /// Decide where `path` goes and open it. Nothing at `path` changes
    /// until [`Output::finish`].
    pub fn create(path: &Path) -> anyhow::Result<Output> {
        let shown = crate::ingest::inputs::shown_path(path);
        if path.as_os_str() == "-" {
            return Ok(Output {
                sink: Sink::Stdout(Watched(io::stdout().lock())),
                shown: "standard output".into(),
            });
        }
        let sink = match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => {
                anyhow::bail!("cannot write {shown}: it is a directory; name a file")
            }
            Ok(m) if !m.is_file() => {
                let file = OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(|e| write_error(&shown, &e))?;
                Sink::Direct(BufWriter::new(file))
            }
            Ok(m) => {
                // Through a symbolic link, the file it names is replaced
                // and the link kept.
                let target = std::fs::canonicalize(path).map_err(|e| write_error(&shown, &e))?;
                atomic(&shown, target, Some(m.permissions()))?
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if path.symlink_metadata().is_ok() {
                    anyhow::bail!(
                        "cannot write {shown}: it is a symbolic link to a missing file; \
                         remove the link or name its target"
                    );
                }
                atomic(&shown, path.to_path_buf(), None)?
            }
            Err(e) => return Err(write_error(&shown, &e)),
        };
        Ok(Output { sink, shown })
    }

    pub fn writer(&mut self) -> &mut dyn Write {
        match &mut self.sink {
            Sink::Stdout(w) => w,
            Sink::Direct(w) => w,
            Sink::Atomic { writer, .. } => writer,
        }
    }

    /// Whether this is standard output and its reader went away.
    fn reader_gone(&self) -> bool {
        matches!(self.sink, Sink::Stdout(_)) && stdout_closed()
    }

    /// Finish after writing that ended with `filled`: an error leaves a
    /// regular file as it was, and a reader of standard output that went
    /// away (a broken pipe) ends the writing quietly.
    pub fn close(self, filled: anyhow::Result<()>) -> anyhow::Result<()> {
        match filled {
            Ok(()) => self.finish(),
            Err(_) if self.reader_gone() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Flush, and put a regular file in place.
    pub fn finish(self) -> anyhow::Result<()> {
        let shown = self.shown;
        match self.sink {
            Sink::Stdout(mut w) => match w.flush() {
                Err(_) if stdout_closed() => Ok(()),
                r => r.map_err(|e| write_error(&shown, &e)),
            },
            Sink::Direct(mut w) => w.flush().map_err(|e| write_error(&shown, &e)),
            Sink::Atomic {
                temp,
                writer,
                key,
                target,
                mode,
            } => {
                let macced = (*writer)
                    .into_inner()
                    .map_err(|e| write_error(&shown, e.error()))?;
                let file = temp.as_file();
                if let Some(mode) = mode {
                    file.set_permissions(mode)
                        .map_err(|e| write_error(&shown, &e))?;
                }
                file.sync_all().map_err(|e| write_error(&shown, &e))?;
                temp.persist(&target).map_err(|e| write_error(&shown, &e))?;
                // Without its MAC the file is only read as a log by a later
                // walk, as before: not worth failing the run over.
                if let (Some(key), Some((len, mac))) = (key, macced.mac()) {
                    let _ = write_mac(&target, &key.mac_text(Signed::Output, len, &mac));
                }
                Ok(())
            }
        }
    }
}

fn atomic(shown: &str, target: PathBuf, mode: Option<Permissions>) -> anyhow::Result<Sink> {
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // Registered, so that an interrupt removes it too (see signals.rs).
    let temp = crate::signals::temp_in(&dir).map_err(|e| {
        anyhow::anyhow!(
            "cannot write {shown}: cannot create a file in {}: {e}; check the directory exists \
             and is writable",
            crate::ingest::inputs::shown_path(&dir)
        )
    })?;
    // The key convert uses, made now if this machine has none (and said
    // once); without one the file is written all the same.
    let key = match StoreKey::for_writing() {
        Ok((key, made)) => {
            if let Some(made) = made {
                eprintln!("{made}");
            }
            Some(key)
        }
        Err(_) => None,
    };
    let macced = match &key {
        Some(key) => Macced::new(temp.reopen()?, key, Signed::Output),
        None => Macced::unkeyed(temp.reopen()?),
    };
    Ok(Sink::Atomic {
        temp,
        writer: Box::new(BufWriter::new(macced)),
        key,
        target,
        mode,
    })
}

/// Put the MAC file of `target` in place (atomically).
fn write_mac(target: &Path, text: &str) -> io::Result<()> {
    let mac = crate::store_key::mac_path(target);
    let dir = match mac.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let temp = crate::signals::temp_in(&dir)?;
    std::fs::write(temp.path(), text)?;
    temp.persist(&mac)
}

fn write_error(shown: &str, e: &io::Error) -> anyhow::Error {
    let hint = match e.raw_os_error() {
        Some(28) => "; the file system is full: free space or write elsewhere",
        Some(122) => "; the disk quota is exceeded: free space or write elsewhere",
        _ => "",
    };
    anyhow::anyhow!("cannot write {shown}: {e}{hint}")
}

/// Standard output that notes a broken pipe (the reader went away).
struct Watched<W>(W);

impl<W: Write> Write for Watched<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).inspect_err(note_broken_pipe)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().inspect_err(note_broken_pipe)
    }
}

fn note_broken_pipe(e: &io::Error) {
    if e.kind() == io::ErrorKind::BrokenPipe {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
    }
}

/// Refuse an output that is one of the inputs: writing it would destroy the
/// evidence being audited. `outputs` are (option, path) pairs.
pub fn refuse_inputs(
    outputs: &[(&str, &Path)],
    inputs: &[crate::ingest::inputs::Input],
) -> anyhow::Result<()> {
    for (option, out) in outputs {
        let Ok(m) = std::fs::metadata(out) else {
            continue; // a new file cannot be an input
        };
        if !m.is_file() {
            continue; // special files are written in place, never replaced
        }
        let same = inputs.iter().find(|i| {
            i.stream.is_none()
                && std::fs::metadata(&i.path)
                    .is_ok_and(|im| im.dev() == m.dev() && im.ino() == m.ino())
        });
        if let Some(input) = same {
            anyhow::bail!(
                "{option} {} is the input {}; writing it would destroy the log; \
                 choose another output path",
                crate::ingest::inputs::shown_path(out),
                input.display
            );
        }
    }
    Ok(())
}

/// Refuse a binary output (Parquet) bound for a terminal, where it would
/// only garble the screen: standard output (`path` None or `-`) or a
/// terminal named as the file. A pipe, a file or `/dev/null` is fine.
pub fn refuse_binary_to_terminal(path: Option<&Path>) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    use std::os::unix::fs::FileTypeExt;
    let terminal = match path.filter(|p| p.as_os_str() != "-") {
        None => io::stdout().is_terminal(),
        // Only a character device can be a terminal; opening one does not
        // block, as opening a FIFO would.
        Some(p) => {
            std::fs::metadata(p).is_ok_and(|m| m.file_type().is_char_device())
                && OpenOptions::new()
                    .write(true)
                    .open(p)
                    .is_ok_and(|f| f.is_terminal())
        }
    };
    if terminal {
        anyhow::bail!("--format parquet is binary: write it with -o FILE, or pipe it");
    }
    Ok(())
}
