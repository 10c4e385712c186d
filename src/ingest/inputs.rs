//! Turning command-line paths (files, directories, globs) into a sorted list
//! of inputs, each with its format recognised by content.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Ndjson,
    Gzip,
    Zstd,
    Parquet,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Ndjson => "ndjson",
            Format::Gzip => "ndjson.gz",
            Format::Zstd => "ndjson.zst",
            Format::Parquet => "parquet",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Input {
    pub path: PathBuf,
    /// The path as shown in reports and stored in `src_file`.
    pub display: String,
    pub format: Format,
    pub bytes: u64,
}

/// A path the user named that cannot be used: the run stops (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot read {path}: {reason}; check the path or pass a readable file")]
    Unreadable { path: String, reason: String },
    #[error(
        "no file matches {pattern}; check the pattern (quote it to stop the shell expanding it)"
    )]
    NoMatch { pattern: String },
    #[error("bad glob pattern {pattern}: {reason}")]
    BadPattern { pattern: String, reason: String },
    #[error("no input given; name at least one log file, directory or glob")]
    Empty,
}

/// Problems inside a directory walk: reported, not fatal.
#[derive(Debug, Clone)]
pub struct Skipped {
    pub path: String,
    pub reason: String,
}

/// File names taken from a directory walk (explicit files are always taken).
const LOG_EXTENSIONS: [&str; 9] = [
    "ndjson", "jsonl", "json", "log", "gz", "zst", "zstd", "parquet", "ldjson",
];

/// Expand paths into inputs. Files named explicitly must be readable;
/// directories are walked recursively in sorted order.
pub fn expand(paths: &[PathBuf]) -> Result<(Vec<Input>, Vec<Skipped>), InputError> {
    if paths.is_empty() {
        return Err(InputError::Empty);
    }
    let mut inputs = Vec::new();
    let mut skipped = Vec::new();
    for p in paths {
        let shown = p.display().to_string();
        if p.is_dir() {
            walk_dir(p, &mut inputs, &mut skipped);
        } else if p.exists() {
            inputs.push(open_input(p).map_err(|reason| InputError::Unreadable {
                path: shown.clone(),
                reason,
            })?);
        } else if shown.contains(['*', '?', '[']) {
            let matches = glob::glob(&shown).map_err(|e| InputError::BadPattern {
                pattern: shown.clone(),
                reason: e.to_string(),
            })?;
            let mut found: Vec<PathBuf> = matches.filter_map(Result::ok).collect();
            found.sort();
            if found.is_empty() {
                return Err(InputError::NoMatch { pattern: shown });
            }
            for f in found {
                if f.is_dir() {
                    walk_dir(&f, &mut inputs, &mut skipped);
                } else {
                    match open_input(&f) {
                        Ok(i) => inputs.push(i),
                        Err(reason) => skipped.push(Skipped {
                            path: f.display().to_string(),
                            reason,
                        }),
                    }
                }
            }
        } else {
            // A dangling symbolic link or a link loop: say which.
            let reason = match (p.symlink_metadata(), std::fs::metadata(p)) {
                (Ok(_), Err(e)) => format!("a symbolic link that cannot be followed ({e})"),
                _ => "no such file or directory".into(),
            };
            return Err(InputError::Unreadable {
                path: shown,
                reason,
            });
        }
    }
    Ok((inputs, skipped))
}

fn walk_dir(dir: &Path, inputs: &mut Vec<Input>, skipped: &mut Vec<Skipped>) {
    let before = inputs.len();
    let walker = walkdir::WalkDir::new(dir)
        .follow_links(true)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'));
    for entry in walker {
        match entry {
            Ok(e) if e.file_type().is_file() => {
                let name = e.file_name().to_string_lossy().to_lowercase();
                let wanted = LOG_EXTENSIONS
                    .iter()
                    .any(|x| name.ends_with(&format!(".{x}")));
                if !wanted {
                    continue;
                }
                match open_input(e.path()) {
                    Ok(i) => inputs.push(i),
                    Err(reason) => skipped.push(Skipped {
                        path: e.path().display().to_string(),
                        reason,
                    }),
                }
            }
            Ok(_) => {}
            Err(e) => skipped.push(Skipped {
                path: e
                    .path()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| dir.display().to_string()),
                reason: if e.loop_ancestor().is_some() {
                    "symbolic link loop".into()
                } else {
                    e.io_error()
                        .map(|io| io.to_string())
                        .unwrap_or_else(|| e.to_string())
                },
            }),
        }
    }
    if inputs.len() == before {
        skipped.push(Skipped {
            path: dir.display().to_string(),
            reason: format!(
                "no log files in this directory (looked for *.{})",
                LOG_EXTENSIONS.join(", *.")
            ),
        });
    }
}

fn open_input(path: &Path) -> Result<Input, String> {
    let mut f = File::open(path).map_err(|e| e.to_string())?;
    let bytes = f.metadata().map_err(|e| e.to_string())?.len();
    let mut magic = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match f.read(&mut magic[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) => return Err(e.to_string()),
        }
    }
    let format = sniff(&magic[..got]);
    Ok(Input {
        path: path.to_path_buf(),
        display: path.display().to_string(),
        format,
        bytes,
    })
}

/// Recognise the format by its first bytes, whatever the file is called.
pub fn sniff(magic: &[u8]) -> Format {
    match magic {
        [0x1f, 0x8b, ..] => Format::Gzip,
        [0x28, 0xb5, 0x2f, 0xfd, ..] => Format::Zstd,
        [b'P', b'A', b'R', b'1', ..] => Format::Parquet,
        _ => Format::Ndjson,
    }
}
