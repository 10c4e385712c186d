//! Streaming NDJSON reading: one reader thread cuts each input into chunks of
//! whole lines; worker threads parse chunks into Arrow batches in parallel.
//! Memory stays bounded by chunk size x channel depth, whatever the file size.

use super::inputs::{Input, LogFormat};
use super::normalize::{NormalizeOptions, clip, parse_line};
use super::row::ChunkRows;
use super::row::{ChunkShape, EventBuilders};
use std::io::{self, BufReader, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Bytes per chunk handed to a worker.
const CHUNK_BYTES: usize = 4 << 20;
/// Longest rejection reason kept (it may quote the offending value).
pub const MAX_REASON_CHARS: usize = 400;
/// Lines longer than this are rejected without being held in memory.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 << 20;

/// A run of whole lines of one input.
pub struct Chunk {
    pub file_idx: u32,
    pub chunk_idx: u32,
    /// 1-based number of the first line in `data`.
    pub first_line: u64,
    pub data: Vec<u8>,
    /// A line that was too long to hold: (line number, its length so far).
    pub oversized: Option<(u64, u64)>,
}

/// Chunk buffers come back here once parsed and are read into again: a
/// fresh buffer costs a page fault and a kernel page clear per page, which
/// profiles showed as a large share of ingest time.
#[derive(Clone, Default)]
pub struct BufferPool(Arc<Mutex<Vec<Vec<u8>>>>);

/// A chunk buffer's capacity: a chunk and the partial line carried over.
const BUFFER_BYTES: usize = CHUNK_BYTES + 4096;
/// Buffers kept for reuse; more than are ever in flight at once.
const POOL_BUFFERS: usize = 16;

impl BufferPool {
    fn take(&self) -> Vec<u8> {
        let reused = self.0.lock().ok().and_then(|mut pool| pool.pop());
        reused.unwrap_or_else(|| Vec::with_capacity(BUFFER_BYTES))
    }

    /// Hand a parsed chunk's buffer back for the reader to fill again.
    pub fn give(&self, mut buf: Vec<u8>) {
        buf.clear();
        // One that grew around a long line goes: the pool would keep it.
        if buf.capacity() > 2 * BUFFER_BYTES {
            return;
        }
        if let Ok(mut pool) = self.0.lock()
            && pool.len() < POOL_BUFFERS
        {
            pool.push(buf);
        }
    }
}

/// A rejected line.
#[derive(Debug, Clone)]
pub struct BadLine {
    pub seq: i64,
    pub line: u64,
    pub reason: String,
    pub excerpt: String,
    pub id: Option<String>,
    pub type_: Option<String>,
    /// The original file, when it differs from the input read (bad lines
    /// stored in Parquet by `convert`).
    pub src_file: Option<Arc<str>>,
    /// The line's bytes hashed (None for a line too long to hold).
    pub digest: Option<[u8; 16]>,
}

/// What a worker made of a chunk.
pub struct ParsedChunk {
    pub file_idx: u32,
    pub chunk_idx: u32,
    pub events: ChunkRows,
    /// Per event row: its id key and digest.
    pub keys: Vec<super::normalize::Parsed>,
    /// The first rejected lines (at most `ChunkLimits::max_bad`).
    pub bad: Vec<BadLine>,
    /// Rejected lines beyond those: counted, not kept.
    pub bad_unlisted: u64,
    /// Every rejected line as read, each followed by a newline, when
    /// `ChunkLimits::keep_raw` (for `--bad-lines`; a line too long to be
    /// held while reading is an empty line there).
    pub bad_raw: Vec<u8>,
    pub lines: u64,
    pub blank: u64,
    /// Redeliveries a `convert` run already collapsed into these rows
    /// (their stored `redeliveries`); 0 for lines read here.
    pub collapsed: u64,
}

impl ParsedChunk {
    /// Rejected lines, listed or not.
    pub fn bad_count(&self) -> u64 {
        self.bad.len() as u64 + self.bad_unlisted
    }
}

/// What a chunk's parse keeps of its rejected lines.
#[derive(Debug, Clone, Copy)]
pub struct ChunkLimits {
    /// Longer lines are rejected.
    pub max_line: usize,
    /// Rejected lines kept with their reason; the rest are only counted (a
    /// log of nothing but bad lines must not cost more than its size).
    pub max_bad: usize,
    /// Keep every rejected line's bytes (for `--bad-lines`).
    pub keep_raw: bool,
}

impl ChunkLimits {
    /// A line cap, every rejected line listed, none kept verbatim.
    pub fn lines(max_line: usize) -> ChunkLimits {
        ChunkLimits {
            max_line,
            max_bad: usize::MAX,
            keep_raw: false,
        }
    }
}

/// Global input order: file index in the high bits, line (or row) below.
pub fn seq_of(file_idx: u32, line: u64) -> i64 {
    ((file_idx as i64) << 40) | (line as i64 & ((1 << 40) - 1))
}

/// Counts compressed bytes as they are read, for progress and error offsets.
struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
    total: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        self.total += n as u64;
        Ok(n)
    }
}

/// Read one input, sending chunks of whole lines. Returns the error that
/// stopped the read early (everything before it was sent).
pub fn read_chunks(
    input: &Input,
    file_idx: u32,
    max_line: usize,
    progress: Arc<AtomicU64>,
    pool: &BufferPool,
    send: &mut dyn FnMut(Chunk),
    stop: &dyn Fn() -> bool,
) -> Option<String> {
    let source: Box<dyn Read + Send> = match &input.stream {
        Some(stream) => match stream.take() {
            Some(r) => r,
            None => return Some("already read (a stream can be read only once)".into()),
        },
        None => match &input.object {
            Some(object) => Box::new(object.reader_from(0)),
            None => match input.open_file() {
                Ok(f) => Box::new(f),
                Err(e) => return Some(e),
            },
        },
    };
    let counting = Counting {
        inner: BufReader::with_capacity(1 << 20, source),
        count: progress,
        total: 0,
    };
    let mut reader: Box<dyn Read> = match input.format {
        LogFormat::Gzip => Box::new(Stepped(flate2::read::MultiGzDecoder::new(counting))),
        LogFormat::Zstd => match zstd::stream::read::Decoder::with_buffer(BufReader::new(counting))
        {
            Ok(d) => Box::new(Stepped(d)),
            Err(e) => return Some(format!("not a readable zstd stream: {e}")),
        },
        _ => Box::new(counting),
    };
    let mut state = Cutter {
        file_idx,
        chunk_idx: 0,
        next_line: 1,
        max_line,
        buf: pool.take(),
        decompressed: 0,
        pool: pool.clone(),
    };
    let mut first = true;
    // Reads start at the file's size and double up to a chunk: zeroing a
    // chunk-sized buffer twice was most of reading a one-line file.
    let mut step = CHUNK_BYTES.min((input.bytes as usize).saturating_add(1).max(64 << 10));
    loop {
        let start = state.buf.len();
        state.buf.resize(start + step, 0);
        step = (2 * step).min(CHUNK_BYTES);
        let read = read_full(&mut reader, &mut state.buf[start..]);
        let (n, err) = match read {
            Ok(n) => (n, None),
            Err((n, e)) => (n, Some(e)),
        };
        state.buf.truncate(start + n);
        state.decompressed += n as u64;
        if first {
            // A UTF-8 byte order mark is not part of the first line.
            if state.buf.starts_with(&[0xef, 0xbb, 0xbf]) {
                state.buf.drain(..3);
            }
            first = false;
        }
        let at_end = n == 0 || err.is_some();
        state.cut(at_end, send, &mut reader);
        if let Some(e) = err {
            let what = match input.format {
                LogFormat::Gzip => "gzip stream",
                LogFormat::Zstd => "zstd stream",
                _ if input.object.is_some() => "object",
                _ => "file",
            };
            let lost = if matches!(input.format, LogFormat::Gzip | LogFormat::Zstd) {
                format!(
                    " (up to {} KiB just before the break are lost)",
                    DECODE_STEP >> 10
                )
            } else {
                String::new()
            };
            return Some(format!(
                "{what} broke after {} bytes of data (line {}): {e}; lines before it were kept{lost}",
                state.decompressed,
                state.next_line.saturating_sub(1).max(1)
            ));
        }
        if at_end || stop() {
            return None;
        }
    }
}

/// Decoders drop what they produced in a read call that then fails on
/// corrupt input; reading in small steps bounds that loss.
const DECODE_STEP: usize = 8 << 10;

/// Caps each read at `DECODE_STEP` bytes.
struct Stepped<R>(R);

impl<R: Read> Read for Stepped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(DECODE_STEP);
        self.0.read(&mut buf[..n])
    }
}

/// Read until the buffer is full or the stream ends; on error also report how
/// much was read before it.
fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> Result<usize, (usize, io::Error)> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err((got, e)),
        }
    }
    Ok(got)
}

struct Cutter {
    file_idx: u32,
    chunk_idx: u32,
    next_line: u64,
    max_line: usize,
    buf: Vec<u8>,
    decompressed: u64,
    pool: BufferPool,
}

impl Cutter {
    fn emit(&mut self, data: Vec<u8>, oversized: Option<(u64, u64)>, send: &mut dyn FnMut(Chunk)) {
        let lines = memchr::memchr_iter(b'\n', &data).count() as u64
            + u64::from(!data.is_empty() && !data.ends_with(b"\n"))
            + u64::from(oversized.is_some());
        send(Chunk {
            file_idx: self.file_idx,
            chunk_idx: self.chunk_idx,
            first_line: self.next_line,
            data,
            oversized,
        });
        self.chunk_idx += 1;
        self.next_line += lines;
    }

    /// Send the whole lines in the buffer; keep a trailing partial line.
    fn cut(&mut self, at_end: bool, send: &mut dyn FnMut(Chunk), reader: &mut dyn Read) {
        if at_end {
            if !self.buf.is_empty() {
                let data = std::mem::take(&mut self.buf);
                self.emit(data, None, send);
            }
            return;
        }
        match memchr::memrchr(b'\n', &self.buf) {
            Some(last) => {
                let mut rest = self.pool.take();
                rest.extend_from_slice(&self.buf[last + 1..]);
                self.buf.truncate(last + 1);
                let data = std::mem::replace(&mut self.buf, rest);
                self.emit(data, None, send);
            }
            // A CR at the end may be the first half of a CRLF whose LF the
            // next read brings: the cap counts the line without it, as the
            // parse does, wherever a read happens to end.
            None if self.buf.len() - usize::from(self.buf.ends_with(b"\r")) > self.max_line => {
                // One line longer than the cap: drop it as we read it.
                let mut len = self.buf.len() as u64;
                self.buf.clear();
                let mut scratch = vec![0u8; 1 << 16];
                loop {
                    match read_full(reader, &mut scratch) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            self.decompressed += n as u64;
                            if let Some(nl) = memchr::memchr(b'\n', &scratch[..n]) {
                                len += nl as u64;
                                self.buf.extend_from_slice(&scratch[nl + 1..n]);
                                break;
                            }
                            len += n as u64;
                        }
                    }
                }
                self.emit(Vec::new(), Some((self.next_line, len)), send);
            }
            None => {} // keep reading: the line continues
        }
    }
}

/// Parse one chunk into events and bad lines.
pub fn parse_chunk(
    chunk: &Chunk,
    src_file: Arc<str>,
    limits: ChunkLimits,
    opts: NormalizeOptions,
    shape: &mut ChunkShape,
) -> ParsedChunk {
    let max_line = limits.max_line;
    let mut builders = EventBuilders::for_chunk(src_file, chunk.data.len(), shape);
    let mut keys = Vec::with_capacity(chunk.data.len() / 400);
    let mut bad = Rejected {
        kept: Vec::new(),
        unlisted: 0,
        raw: Vec::new(),
        limits,
    };
    let (mut lines, mut blank) = (0u64, 0u64);
    if let Some((line, len)) = chunk.oversized {
        lines += 1;
        bad.push(&[], || BadLine {
            seq: seq_of(chunk.file_idx, line),
            line,
            reason: format!(
                "line of {len} bytes exceeds the {max_line}-byte cap (--max-line-bytes)"
            ),
            excerpt: String::new(),
            id: None,
            type_: None,
            src_file: None,
            digest: None,
        });
    }
    // The piece after a final newline is not a line.
    let body = chunk.data.strip_suffix(b"\n").unwrap_or(&chunk.data);
    let pieces = (!chunk.data.is_empty()).then(|| lines_of(body));
    for (this, raw) in (chunk.first_line..).zip(pieces.into_iter().flatten()) {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.iter().all(u8::is_ascii_whitespace) {
            blank += 1;
            continue;
        }
        lines += 1;
        let seq = seq_of(chunk.file_idx, this);
        // Built only for a line that is listed.
        let reject = |reason: String, id: Option<String>, type_: Option<String>| {
            move || BadLine {
                seq,
                line: this,
                // A reason quotes the offending value; a hostile one can be huge.
                reason: clip(&reason, MAX_REASON_CHARS).into_owned(),
                excerpt: excerpt(raw),
                id,
                type_,
                src_file: None,
                digest: Some(super::identity::digest(raw)),
            }
        };
        if raw.len() > max_line {
            let reason = format!(
                "line of {} bytes exceeds the {max_line}-byte cap (--max-line-bytes)",
                raw.len()
            );
            bad.push(raw, reject(reason, None, None));
            continue;
        }
        // SIMD validation for the common case; std's for where it broke.
        let text = match simdutf8::basic::from_utf8(raw).or_else(|_| std::str::from_utf8(raw)) {
            Ok(t) => t,
            Err(e) => {
                let reason = format!("invalid UTF-8 at byte {}", e.valid_up_to());
                bad.push(raw, reject(reason, None, None));
                continue;
            }
        };
        match parse_line(text, seq, this as i64, opts, |row| builders.push(row)) {
            Ok(p) => keys.push(p),
            Err(r) => bad.push(raw, reject(r.reason, r.id, r.type_)),
        }
    }
    if let Some(measured) = builders.shape() {
        *shape = measured;
    }
    ParsedChunk {
        file_idx: chunk.file_idx,
        chunk_idx: chunk.chunk_idx,
        events: ChunkRows::Building(Box::new(builders)),
        keys,
        bad: bad.kept,
        bad_unlisted: bad.unlisted,
        bad_raw: bad.raw,
        lines,
        blank,
        collapsed: 0,
    }
}

/// A chunk's rejected lines as they are found.
struct Rejected {
    kept: Vec<BadLine>,
    unlisted: u64,
    raw: Vec<u8>,
    limits: ChunkLimits,
}

impl Rejected {
    fn push(&mut self, raw: &[u8], line: impl FnOnce() -> BadLine) {
        if self.limits.keep_raw {
            self.raw.extend_from_slice(raw);
            self.raw.push(b'\n');
        }
        if self.kept.len() < self.limits.max_bad {
            self.kept.push(line());
        } else {
            self.unlisted += 1;
        }
    }
}

/// The lines of `body`, split at each newline: memchr finds them many
/// bytes at a time, where a byte-by-byte split was 8% of ingest.
fn lines_of(body: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut start = 0;
    memchr::memchr_iter(b'\n', body)
        .chain(std::iter::once(body.len()))
        .map(move |end| {
            let line = &body[start..end];
            start = end + 1;
            line
        })
}

/// A short, printable excerpt of a line for reports.
pub fn excerpt(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(&raw[..raw.len().min(160)]);
    let mut out: String = text
        .chars()
        .take(120)
        .map(|c| if c.is_control() { '\u{FFFD}' } else { c })
        .collect();
    if raw.len() > 160 || text.chars().count() > 120 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_like_a_byte_split() {
        for body in [&b""[..], b"a", b"a\n", b"\n\n", b"ab\ncd\n\nef"] {
            let expected: Vec<&[u8]> = body.split(|b| *b == b'\n').collect();
            assert_eq!(lines_of(body).collect::<Vec<_>>(), expected);
        }
    }

    #[test]
    fn the_pool_reuses_chunk_buffers_but_not_ones_grown_around_a_long_line() {
        let pool = BufferPool::default();
        let mut buf = pool.take();
        buf.extend_from_slice(b"{}\n");
        let at = buf.as_ptr();
        pool.give(buf);
        let again = pool.take();
        assert_eq!(again.as_ptr(), at);
        assert!(again.is_empty());
        pool.give(Vec::with_capacity(4 * CHUNK_BYTES));
        assert_eq!(pool.take().capacity(), BUFFER_BYTES);
    }
}
