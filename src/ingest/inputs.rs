//! Turning command-line paths (files, directories, globs, object-store URLs,
//! standard input) into a sorted list of inputs, each with its format
//! recognised by content.

use std::fs::File;
use std::io::{IsTerminal, Read};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use crate::log_format::{
    LOG_EXTENSIONS, LogFormat, Skipped, named_like_a_log, not_a_log_reason, opens_a_json_object,
    sniff,
};

#[derive(Debug, Clone)]
pub struct Input {
    pub path: PathBuf,
    /// The path as shown in reports and stored in `src_file`.
    pub display: String,
    pub format: LogFormat,
    pub bytes: u64,
    /// A pipe, FIFO, terminal or standard input: it can be read only once,
    /// so the handle opened to recognise its format is kept, with the bytes
    /// read for that, and read from there on.
    pub stream: Option<Stream>,
    /// An object in a store (`s3://…`), read by ranges.
    pub object: Option<crate::object_storage::RemoteObject>,
    /// The file (device, inode) the walk or the command line found and
    /// sniffed: the readers open the path again, and read it only when it
    /// is still that file (see [`Input::open_file`]).
    pub found_as: Option<(u64, u64)>,
}

/// O_NONBLOCK on Linux (std names no open flags).
const O_NONBLOCK: i32 = 0o4000;

impl Input {
    /// The input's file, opened again for reading: refused unless it is
    /// still the regular file that was found, so that a name swapped in
    /// between (a link to `/dev/zero`, another log) is never read.
    pub fn open_file(&self) -> Result<File, String> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        // Non-blocking, so that a FIFO swapped in cannot hold the open (on
        // a regular file the flag changes nothing).
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(O_NONBLOCK)
            .open(&self.path)
            .map_err(|e| format!("cannot open: {e}"))?;
        let meta = file.metadata().map_err(|e| format!("cannot open: {e}"))?;
        let now = (meta.dev(), meta.ino());
        if !meta.is_file() || self.found_as.is_some_and(|found| found != now) {
            return Err(
                "it was replaced after it was found (its name now leads to another file); \
                 not read: audit again once the directory is still"
                    .into(),
            );
        }
        Ok(file)
    }
}

/// A one-time readable input, opened already (see [`Input::stream`]).
#[derive(Clone)]
pub struct Stream(Arc<Mutex<Option<Box<dyn Read + Send>>>>);

impl Stream {
    fn new(head: Vec<u8>, rest: Box<dyn Read + Send>) -> Stream {
        let reader: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(head).chain(rest));
        Stream(Arc::new(Mutex::new(Some(reader))))
    }

    /// The reader, from its first byte; None once taken.
    pub fn take(&self) -> Option<Box<dyn Read + Send>> {
        self.0.lock().ok().and_then(|mut r| r.take())
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Stream")
    }
}

/// How standard input is named on the command line and in reports.
pub const STDIN_ARG: &str = "-";
pub const STDIN_NAME: &str = "<stdin>";

/// A path the user named that cannot be used: the run stops (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot read {path}: {reason}; check the path or pass a readable file")]
    Unreadable { path: String, reason: String },
    #[error(
        "cannot read {path}: {reason}; a log that cannot be read may hold findings: make it \
         readable, or pass --allow-unreadable to audit the rest and list it as skipped"
    )]
    UnreadableInWalk { path: String, reason: String },
    #[error(
        "no file matches {pattern}; check the pattern (quote it to stop the shell expanding it)"
    )]
    NoMatch { pattern: String },
    #[error("bad glob pattern {pattern}: {reason}")]
    BadPattern { pattern: String, reason: String },
    #[error(
        "no input given; name at least one log file, directory or glob (`-` reads standard input)"
    )]
    Empty,
    #[error("standard input (`-`) is named more than once; it can be read only once")]
    StdinTwice,
    #[error(
        "{path} holds no log file{skipped}; check the path (a wrong date, a stopped log \
         shipper?) or pass --allow-empty to accept it"
    )]
    NoLogs { path: String, skipped: String },
    #[error("cannot read {url}: {reason}")]
    Remote { url: String, reason: String },
    /// Nothing at an object URL: no object, no object below it.
    #[error("cannot read {url}: {reason}")]
    RemoteMissing { url: String, reason: String },
    /// Parquet of two convert runs whose seqs overlap (see
    /// `parquet::check_seqs_disjoint`, which words it).
    #[error("{0}")]
    OverlappingRuns(String),
    /// A file in convert's layout whose MAC does not match (`store_key`).
    #[error("{0}")]
    Unauthentic(String),
}

/// What a walk skipped, for the error that it found no log: the first few.
fn skipped_note(skipped: &[Skipped]) -> String {
    const SHOWN: usize = 3;
    if skipped.is_empty() {
        return String::new();
    }
    let mut listed: Vec<String> = skipped
        .iter()
        .take(SHOWN)
        .map(|s| format!("{}: {}", s.path, s.reason))
        .collect();
    if skipped.len() > SHOWN {
        listed.push(format!("and {} more", skipped.len() - SHOWN));
    }
    format!(" ({} skipped: {})", skipped.len(), listed.join("; "))
}

/// Expand paths into inputs. Files named explicitly must be readable;
/// directories are walked recursively in sorted order; object-store URLs
/// are listed the same way (see `remote`). No path at all means standard
/// input when it is not a terminal (`zcat x.gz | hvaudit audit`). A
/// directory or pattern that yields no log is an error unless `allow_empty`.
pub fn expand(
    paths: &[PathBuf],
    allow_empty: bool,
    allow_unreadable: bool,
) -> Result<(Vec<Input>, Vec<Skipped>), InputError> {
    let stdin_default = [PathBuf::from(STDIN_ARG)];
    let paths = if paths.is_empty() && !std::io::stdin().is_terminal() {
        &stdin_default[..]
    } else {
        paths
    };
    if paths.is_empty() {
        return Err(InputError::Empty);
    }
    let mut inputs = Vec::new();
    let mut skipped = Vec::new();
    if paths.iter().filter(|p| p.as_os_str() == STDIN_ARG).count() > 1 {
        return Err(InputError::StdinTwice);
    }
    for p in paths {
        let shown = shown_path(p);
        let (inputs_before, skipped_before) = (inputs.len(), skipped.len());
        let unreadable = |reason: String| InputError::Unreadable {
            path: shown.clone(),
            reason,
        };
        if let Some(url) = p.to_str().filter(|s| crate::object_storage::is_url(s)) {
            let found = crate::object_storage::expand(url).map_err(|e| match e.missing {
                true => InputError::RemoteMissing {
                    url: e.url,
                    reason: e.reason,
                },
                false => InputError::Remote {
                    url: e.url,
                    reason: e.reason,
                },
            })?;
            if found.objects.is_empty() && !allow_empty {
                return Err(InputError::NoLogs {
                    path: shown,
                    skipped: skipped_note(&found.skipped),
                });
            }
            skipped.extend(found.skipped);
            for object in found.objects {
                let format = object.format().map_err(|e| InputError::Remote {
                    url: object.url.clone(),
                    reason: e.to_string(),
                })?;
                inputs.push(Input {
                    path: PathBuf::from(&object.url),
                    display: object.url.clone(),
                    format,
                    bytes: object.size,
                    stream: None,
                    object: Some(object),
                    found_as: None,
                });
            }
            continue;
        } else if p.as_os_str() == STDIN_ARG {
            let stdin = std::io::stdin();
            let terminal = stdin.is_terminal();
            inputs.push(
                open_stream(p, STDIN_NAME.into(), Box::new(stdin), terminal).map_err(unreadable)?,
            );
        } else if p.is_dir() {
            walk_dir(p, &mut inputs, &mut skipped, allow_unreadable)?;
        } else if p.exists() {
            inputs.push(open_named(p).map_err(unreadable)?);
        } else if shown.contains(['*', '?', '[']) {
            let pattern = p.to_string_lossy();
            let matches = glob::glob(&pattern).map_err(|e| InputError::BadPattern {
                pattern: shown.clone(),
                reason: e.to_string(),
            })?;
            let mut found: Vec<PathBuf> = matches.filter_map(Result::ok).collect();
            found.sort();
            if found.is_empty() {
                if !allow_empty {
                    return Err(InputError::NoMatch { pattern: shown });
                }
                skipped.push(Skipped {
                    path: shown.clone(),
                    reason: "matches no file (--allow-empty)".into(),
                });
            }
            for f in found {
                if f.is_dir() {
                    walk_dir(&f, &mut inputs, &mut skipped, allow_unreadable)?;
                } else if f.is_file() && written_by_hvaudit(&f) {
                    skipped.push(hvaudit_output(&f));
                } else {
                    match open_named(&f) {
                        Ok(i) => inputs.push(i),
                        Err(reason) => skipped.push(passed_over(&f, reason, allow_unreadable)?),
                    }
                }
            }
        } else {
            // A dangling symbolic link or a link loop: say which.
            let reason = match (p.symlink_metadata(), std::fs::metadata(p)) {
                (Ok(_), Err(e)) => format!("a symbolic link that cannot be followed ({e})"),
                _ => "no such file or directory".into(),
            };
            return Err(unreadable(reason));
        }
        if inputs.len() == inputs_before && !allow_empty && p.as_os_str() != STDIN_ARG {
            // The walk's own "no log files in this directory" is what the
            // error says already.
            let inside: Vec<Skipped> = skipped[skipped_before..]
                .iter()
                .filter(|s| s.path != shown)
                .cloned()
                .collect();
            return Err(InputError::NoLogs {
                path: shown,
                skipped: skipped_note(&inside),
            });
        }
    }
    Ok((inputs, skipped))
}

/// A file that a walk or pattern found but could not read: passed over
/// and listed with `--allow-unreadable`; otherwise the run stops, since a
/// log that cannot be read may be the one that holds a finding.
fn passed_over(path: &Path, reason: String, allow_unreadable: bool) -> Result<Skipped, InputError> {
    if !allow_unreadable {
        return Err(InputError::UnreadableInWalk {
            path: shown_path(path),
            reason,
        });
    }
    Ok(Skipped {
        path: shown_path(path),
        reason: format!("cannot be read ({reason}; --allow-unreadable)"),
    })
}

/// ELOOP on Linux: "too many levels of symbolic links" (std has no stable
/// error kind for it).
const ELOOP: i32 = 40;

/// Whether a name is one of hvaudit's own temporary files or directories
/// (`.hvaudit-*`), which a walk passes over without a word.
fn own_temporary(name: &str) -> bool {
    name.starts_with(".hvaudit-")
}

/// Whether `path`, a regular file a walk or pattern found, is one hvaudit
/// wrote for its user (a report, rejected lines, a query's result): its
/// MAC file beside it, of that kind, checks with this environment's store
/// key. Only a MAC that checks counts: anything else is read as found, so
/// no file can pass itself off as a report without the key.
fn written_by_hvaudit(path: &Path) -> bool {
    use crate::store_key::{MAC_FILE_LIMIT, Signed, StoreKey, check, mac_of_file, mac_path};
    static KEY: std::sync::OnceLock<Option<StoreKey>> = std::sync::OnceLock::new();
    let mac = mac_path(path);
    if mac.symlink_metadata().is_err() {
        return false;
    }
    let Some(key) = KEY.get_or_init(|| StoreKey::for_reading().ok().flatten()) else {
        return false;
    };
    let Ok(text) = crate::operator_files::read_text(&mac, MAC_FILE_LIMIT) else {
        return false;
    };
    let Ok(file) = crate::operator_files::open_regular(path) else {
        return false;
    };
    mac_of_file(key, Signed::Output, &file)
        .is_ok_and(|(len, hash)| check(key, Signed::Output, &text, len, &hash).is_ok())
}

/// How a file hvaudit wrote is listed among the inputs passed over.
fn hvaudit_output(path: &Path) -> Skipped {
    Skipped {
        path: shown_path(path),
        reason: "written by hvaudit (a report, rejected lines or a query's result, as its MAC \
                 file says), not a log; name it on the command line to read it"
            .into(),
    }
}

fn walk_dir(
    dir: &Path,
    inputs: &mut Vec<Input>,
    skipped: &mut Vec<Skipped>,
    allow_unreadable: bool,
) -> Result<(), InputError> {
    let before = inputs.len();
    let mut walker = walkdir::WalkDir::new(dir)
        .follow_links(true)
        .sort_by_file_name()
        .into_iter();
    while let Some(entry) = walker.next() {
        // A name that starts with a dot is not walked into or read, but
        // listed, so that nothing in the tree goes unmentioned.
        if let Ok(e) = &entry
            && e.depth() > 0
            && e.file_name().to_string_lossy().starts_with('.')
        {
            let name = e.file_name().to_string_lossy();
            let is_dir = e.file_type().is_dir();
            if is_dir {
                walker.skip_current_dir();
            }
            if !own_temporary(&name) {
                skipped.push(Skipped {
                    path: shown_path(e.path()),
                    reason: format!(
                        "a hidden {} (its name starts with a dot), not read; name it on the \
                         command line to audit it",
                        if is_dir { "directory" } else { "file" }
                    ),
                });
            }
            continue;
        }
        match entry {
            Ok(e) if e.file_type().is_file() && written_by_hvaudit(e.path()) => {
                skipped.push(hvaudit_output(e.path()));
            }
            Ok(e) if e.file_type().is_file() => {
                let named = named_like_a_log(&e.file_name().to_string_lossy());
                let taken = match open_input(e.path()) {
                    Ok(i) if named => Ok(i),
                    // A shipper's `current` or `app.out`: taken when its
                    // content is a log.
                    Ok(i) => match looks_like_a_log(e.path(), i.format) {
                        Ok(true) => Ok(i),
                        Ok(false) => Err(not_a_log_reason()),
                        Err(e) => Err(e),
                    },
                    // A log by its name that cannot be read.
                    Err(reason) if named => {
                        skipped.push(passed_over(e.path(), reason, allow_unreadable)?);
                        continue;
                    }
                    Err(reason) => Err(reason),
                };
                match taken {
                    Ok(i) => inputs.push(i),
                    Err(reason) => skipped.push(Skipped {
                        path: shown_path(e.path()),
                        reason,
                    }),
                }
            }
            Ok(e) if !e.file_type().is_dir() && !e.file_type().is_symlink() => {
                // Never opened inside a walk: a FIFO without a writer would
                // block the run, and a device never ends.
                skipped.push(Skipped {
                    path: shown_path(e.path()),
                    reason: format!(
                        "{}, not a log file; name it on the command line to read it",
                        special_kind(&e.file_type())
                    ),
                });
            }
            Ok(_) => {}
            Err(e) if e.loop_ancestor().is_some() => skipped.push(Skipped {
                path: shown_path(e.path().unwrap_or(dir)),
                reason: "symbolic link loop".into(),
            }),
            Err(e) => {
                let reason = e
                    .io_error()
                    .map(|io| io.to_string())
                    .unwrap_or_else(|| e.to_string());
                // A link to nothing, or to itself, holds nothing to read;
                // a directory or file that cannot be read may hold logs.
                let holds_nothing = e.io_error().is_some_and(|io| {
                    io.kind() == std::io::ErrorKind::NotFound || io.raw_os_error() == Some(ELOOP)
                });
                let path = e.path().unwrap_or(dir);
                skipped.push(if holds_nothing {
                    Skipped {
                        path: shown_path(path),
                        reason,
                    }
                } else {
                    passed_over(path, reason, allow_unreadable)?
                });
            }
        }
    }
    if inputs.len() == before {
        skipped.push(Skipped {
            path: shown_path(dir),
            reason: format!(
                "no log files in this directory (looked for *.{} and for files whose content \
                 is NDJSON, gzip, zstd or Parquet)",
                LOG_EXTENSIONS.join(", *.")
            ),
        });
    }
    Ok(())
}

/// A file named on the command line (or matched by a glob): a regular
/// file, or something read once as a stream (a FIFO, `/dev/stdin`, a
/// process substitution, a terminal). Devices that never end or hold no
/// log (/dev/zero, /dev/urandom, /dev/null, disks) are refused.
fn open_named(path: &Path) -> Result<Input, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    let kind = meta.file_type();
    if kind.is_file() {
        return open_input(path);
    }
    let file = File::open(path).map_err(|e| e.to_string())?;
    let terminal = file.is_terminal();
    if kind.is_fifo() || kind.is_socket() || terminal {
        return open_stream(path, shown_path(path), Box::new(file), terminal);
    }
    Err(format!(
        "{}, not a log file; to read what it produces, pipe it: `cat {} | hvaudit ... -`",
        special_kind(&kind),
        shown_path(path)
    ))
}

fn special_kind(kind: &std::fs::FileType) -> &'static str {
    if kind.is_fifo() {
        "a named pipe (FIFO)"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// Recognise a stream's format from its first bytes and keep them for the
/// reader: nothing read to recognise it is lost.
fn open_stream(
    path: &Path,
    display: String,
    mut reader: Box<dyn Read + Send>,
    terminal: bool,
) -> Result<Input, String> {
    // A terminal is NDJSON typed or pasted: waiting for four bytes first
    // would hold the first short line back.
    let head = if terminal {
        Vec::new()
    } else {
        read_head(&mut reader, 4).map_err(|e| e.to_string())?
    };
    let format = sniff(&head);
    if format == LogFormat::Parquet {
        return Err(
            "Parquet cannot be read from a pipe (its footer is at the end); save it to a file first"
                .into(),
        );
    }
    Ok(Input {
        path: path.to_path_buf(),
        display,
        format,
        bytes: 0,
        stream: Some(Stream::new(head, reader)),
        object: None,
        found_as: None,
    })
}

/// Up to `n` bytes from the start of `reader` (fewer at its end).
fn read_head(reader: &mut dyn Read, n: usize) -> std::io::Result<Vec<u8>> {
    let mut head = vec![0u8; n];
    let mut got = 0;
    while got < n {
        match reader.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    head.truncate(got);
    Ok(head)
}

fn open_input(path: &Path) -> Result<Input, String> {
    use std::os::unix::fs::MetadataExt;
    let mut f = File::open(path).map_err(|e| e.to_string())?;
    let meta = f.metadata().map_err(|e| e.to_string())?;
    let head = read_head(&mut f, 4).map_err(|e| e.to_string())?;
    Ok(Input {
        path: path.to_path_buf(),
        display: shown_path(path),
        format: sniff(&head),
        bytes: meta.len(),
        stream: None,
        object: None,
        found_as: Some((meta.dev(), meta.ino())),
    })
}

/// Whether a file without a log's extension holds a log: compressed or
/// Parquet by its magic bytes, or NDJSON (its first non-blank byte, after
/// a byte order mark, opens a JSON object).
fn looks_like_a_log(path: &Path, format: LogFormat) -> Result<bool, String> {
    if format != LogFormat::Ndjson {
        return Ok(true);
    }
    let mut f = File::open(path).map_err(|e| e.to_string())?;
    let head = read_head(&mut f, 4096).map_err(|e| e.to_string())?;
    Ok(opens_a_json_object(&head))
}

pub use crate::escape::shown_path;
