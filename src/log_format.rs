//! What a log is, for the inputs on disk and in object stores alike: its
//! format by its first bytes, the names a directory walk or a listing
//! takes, and what was passed over and why.

/// The format of an input, recognised by content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Ndjson,
    Gzip,
    Zstd,
    Parquet,
}

impl LogFormat {
    pub fn name(self) -> &'static str {
        match self {
            LogFormat::Ndjson => "ndjson",
            LogFormat::Gzip => "ndjson.gz",
            LogFormat::Zstd => "ndjson.zst",
            LogFormat::Parquet => "parquet",
        }
    }
}

/// Recognise the format by its first bytes, whatever the file is called.
pub fn sniff(magic: &[u8]) -> LogFormat {
    match magic {
        [0x1f, 0x8b, ..] => LogFormat::Gzip,
        [0x28, 0xb5, 0x2f, 0xfd, ..] => LogFormat::Zstd,
        // A skippable frame (0x184D2A50..=0x184D2A5F, little-endian), which
        // pzstd writes first and zstd's decoder passes over.
        [0x50..=0x5f, 0x2a, 0x4d, 0x18, ..] => LogFormat::Zstd,
        [b'P', b'A', b'R', b'1', ..] => LogFormat::Parquet,
        _ => LogFormat::Ndjson,
    }
}

/// File names taken from a directory walk (explicit files are always taken).
pub const LOG_EXTENSIONS: [&str; 9] = [
    "ndjson", "jsonl", "json", "log", "gz", "zst", "zstd", "parquet", "ldjson",
];

/// Whether a file name has one of the log extensions.
pub fn named_like_a_log(name: &str) -> bool {
    let name = name.to_lowercase();
    LOG_EXTENSIONS
        .iter()
        .any(|x| name.ends_with(&format!(".{x}")))
}

/// Why a file or object without a log's name or content was passed over.
pub fn not_a_log_reason() -> String {
    format!(
        "not a log: no log file extension (*.{}) and the content is not NDJSON, gzip, zstd or \
         Parquet",
        LOG_EXTENSIONS.join(", *.")
    )
}

/// Whether text starts (after a byte order mark and blanks) a JSON object.
pub fn opens_a_json_object(head: &[u8]) -> bool {
    let text = head.strip_prefix(&[0xef, 0xbb, 0xbf][..]).unwrap_or(head);
    text.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// Problems inside a directory walk: reported, not fatal.
#[derive(Debug, Clone)]
pub struct Skipped {
    pub path: String,
    pub reason: String,
}
