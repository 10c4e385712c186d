//! What the pages of a Parquet column chunk are, read from their headers
//! alone: kind, sizes and rows, so that a page too large to decode is found
//! before anything is decompressed, and the rows it holds can be skipped.
//!
//! The Parquet crate keeps page headers to itself, so they are read here:
//! the few fields of the Thrift compact protocol a page header needs, every
//! other field skipped. A header is untrusted input: every read stays
//! inside its column chunk (and `header_limit`), nesting is bounded by
//! `MAX_DEPTH`, each value read takes at least one byte, and nothing here
//! panics.

use bytes::Bytes;
use datafusion::parquet::file::metadata::{ColumnChunkMetaData, RowGroupMetaData};
use datafusion::parquet::file::page_index::offset_index::{OffsetIndexMetaData, PageLocation};
use std::ops::Range;

/// Reads `len` bytes of the file at `offset` (fewer only where it ends).
pub type ReadAt<'a> = dyn Fn(u64, usize) -> Result<Bytes, String> + 'a;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageKind {
    Data,
    Index,
    Dictionary,
    DataV2,
}

/// One page, as its header describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub kind: PageKind,
    /// Where its header starts in the file.
    pub offset: u64,
    pub header_len: u64,
    pub compressed: u64,
    pub uncompressed: u64,
    /// Values (levels) of a data or dictionary page.
    pub values: u64,
    /// Rows of a v2 data page (a v1 page does not say).
    pub rows: Option<u64>,
    /// A data page whose values are read through the dictionary page.
    pub dictionary_encoded: bool,
}

impl Page {
    /// Bytes the decoder holds for it: read, then decompressed.
    pub fn bytes(&self) -> u64 {
        self.compressed.max(self.uncompressed)
    }

    /// Its header and data.
    pub fn range(&self) -> Range<u64> {
        self.offset..self.offset + self.header_len + self.compressed
    }
}

/// Compact protocol types.
const STOP: u8 = 0;
const TRUE: u8 = 1;
const FALSE: u8 = 2;
const BYTE: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;
const UUID: u8 = 13;

/// Structs and collections nested deeper than this are refused (a page
/// header nests three deep).
const MAX_DEPTH: u32 = 32;
/// The first read of a header; headers are a few dozen bytes.
const FIRST_READ: usize = 128;
/// Reads grow up to this while a header goes on.
const MAX_READ: usize = 64 << 10;

const PAST_END: &str = "it runs past the end of its column chunk";

/// Reads the bytes of a column chunk front to back, in windows.
struct Cursor<'r, 'a> {
    read: &'r ReadAt<'a>,
    pos: u64,
    /// Nothing at or past this is read.
    end: u64,
    window: Bytes,
    window_at: u64,
    step: usize,
}

impl Cursor<'_, '_> {
    fn byte(&mut self) -> Result<u8, String> {
        if self.pos >= self.end {
            return Err(PAST_END.into());
        }
        let within = usize::try_from(self.pos - self.window_at.min(self.pos)).ok();
        let cached = (self.pos >= self.window_at)
            .then_some(within)
            .flatten()
            .and_then(|i| self.window.get(i).copied());
        let b = match cached {
            Some(b) => b,
            None => {
                let want = (self.end - self.pos).min(self.step as u64) as usize;
                self.window = (self.read)(self.pos, want)?;
                self.window_at = self.pos;
                self.step = (self.step * 2).min(MAX_READ);
                *self
                    .window
                    .first()
                    .ok_or("the file ends inside a page header")?
            }
        };
        self.pos += 1;
        Ok(b)
    }

    fn skip(&mut self, n: u64) -> Result<(), String> {
        match self.pos.checked_add(n) {
            Some(to) if to <= self.end => {
                self.pos = to;
                Ok(())
            }
            _ => {
                // As far as it could go.
                self.pos = self.end;
                Err(PAST_END.into())
            }
        }
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("a number in it is longer than 10 bytes".into())
    }

    fn i32(&mut self) -> Result<i32, String> {
        let v = u32::try_from(self.varint()?).map_err(|_| "an i32 in it is out of range")?;
        Ok(((v >> 1) as i32) ^ -((v & 1) as i32))
    }

    /// A field's type and id (type `STOP` ends a struct).
    fn field(&mut self, last: i16) -> Result<(u8, i16), String> {
        let b = self.byte()?;
        if b == STOP {
            return Ok((STOP, 0));
        }
        let (kind, delta) = (b & 0x0f, b >> 4);
        if kind == STOP {
            return Err(format!("a field header in it is malformed ({b:#04x})"));
        }
        let id = if delta == 0 {
            i16::try_from(self.i32()?).map_err(|_| "a field id in it is out of range")?
        } else {
            last.checked_add(i16::from(delta))
                .ok_or("a field id in it is out of range")?
        };
        Ok((kind, id))
    }

    fn deeper(depth: u32) -> Result<u32, String> {
        if depth >= MAX_DEPTH {
            return Err(format!("it nests deeper than {MAX_DEPTH} levels"));
        }
        Ok(depth + 1)
    }

    /// Pass over a field's value of type `kind`.
    fn skip_value(&mut self, kind: u8, depth: u32) -> Result<(), String> {
        match kind {
            // A field's boolean is in its type.
            TRUE | FALSE => Ok(()),
            _ => self.skip_element(kind, depth),
        }
    }

    /// Pass over a value of type `kind` inside a collection (where a
    /// boolean takes a byte). Every value takes at least one byte, so a
    /// collection claiming more elements than bytes fails at the end.
    fn skip_element(&mut self, kind: u8, depth: u32) -> Result<(), String> {
        match kind {
            TRUE | FALSE | BYTE => self.skip(1),
            I16 | I32 | I64 => self.varint().map(drop),
            DOUBLE => self.skip(8),
            BINARY => {
                let n = self.varint()?;
                self.skip(n)
            }
            LIST | SET => {
                let depth = Self::deeper(depth)?;
                let h = self.byte()?;
                let mut n = u64::from(h >> 4);
                if n == 15 {
                    n = self.varint()?;
                }
                for _ in 0..n {
                    self.skip_element(h & 0x0f, depth)?;
                }
                Ok(())
            }
            MAP => {
                let depth = Self::deeper(depth)?;
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                let kv = self.byte()?;
                for _ in 0..n {
                    self.skip_element(kv >> 4, depth)?;
                    self.skip_element(kv & 0x0f, depth)?;
                }
                Ok(())
            }
            STRUCT => {
                let depth = Self::deeper(depth)?;
                let mut last = 0;
                loop {
                    let (kind, id) = self.field(last)?;
                    if kind == STOP {
                        return Ok(());
                    }
                    self.skip_value(kind, depth)?;
                    last = id;
                }
            }
            UUID => self.skip(16),
            _ => Err(format!("it holds a value of unknown type {kind}")),
        }
    }

    /// The i32 fields 1 to 4 of a page's data, dictionary or v2 header (by
    /// id: values, encodings, a v2 page's rows); the rest passed over.
    fn counts(&mut self) -> Result<Fields, String> {
        let (mut fields, mut last) = (Fields::default(), 0);
        loop {
            let (kind, id) = self.field(last)?;
            match (id, kind) {
                (_, STOP) => return Ok(fields),
                (1..=4, I32) => fields[id as usize] = Some(self.i32()?),
                (1, _) => return Err("its value count is not an i32".into()),
                _ => self.skip_value(kind, 1)?,
            }
            last = id;
        }
    }

    /// A page header from here.
    fn page(&mut self) -> Result<RawHeader, String> {
        let mut h = RawHeader::default();
        let mut last = 0;
        loop {
            let (kind, id) = self.field(last)?;
            match (id, kind) {
                (_, STOP) => return Ok(h),
                (1, I32) => h.kind = Some(self.i32()?),
                (2, I32) => h.uncompressed = Some(self.i32()?),
                (3, I32) => h.compressed = Some(self.i32()?),
                (5, STRUCT) => h.data = Some(self.counts()?),
                (7, STRUCT) => h.dictionary = Some(self.counts()?),
                (8, STRUCT) => h.v2 = Some(self.counts()?),
                (1 | 2 | 3 | 5 | 7 | 8, _) => {
                    return Err(format!("its field {id} has the wrong type ({kind})"));
                }
                _ => self.skip_value(kind, 0)?,
            }
            last = id;
        }
    }
}

/// The i32 fields of a nested header, by id (0 unused).
type Fields = [Option<i32>; 5];

/// A page header's fields as read, before they are checked.
#[derive(Default)]
struct RawHeader {
    kind: Option<i32>,
    uncompressed: Option<i32>,
    compressed: Option<i32>,
    data: Option<Fields>,
    dictionary: Option<Fields>,
    v2: Option<Fields>,
}

/// Encodings whose values are read through the dictionary page.
const PLAIN_DICTIONARY: i32 = 2;
const RLE_DICTIONARY: i32 = 8;

impl RawHeader {
    /// The page it describes, at `offset` with a header of `header_len`
    /// bytes, or what is wrong with it.
    fn page(self, offset: u64, header_len: u64) -> Result<Page, String> {
        let size = |v: Option<i32>, what: &str| -> Result<u64, String> {
            let v = v.ok_or_else(|| format!("it has no {what}"))?;
            u64::try_from(v).map_err(|_| format!("its {what} is {v}"))
        };
        let uncompressed = size(self.uncompressed, "uncompressed size")?;
        let compressed = size(self.compressed, "compressed size")?;
        let fields =
            |h: Option<Fields>, what: &str| h.ok_or_else(|| format!("it has no {what} header"));
        let by_dictionary = |e: Option<i32>| matches!(e, Some(PLAIN_DICTIONARY | RLE_DICTIONARY));
        let (kind, values, rows, dictionary_encoded) = match self.kind {
            Some(0) => {
                let f = fields(self.data, "data page")?;
                (
                    PageKind::Data,
                    size(f[1], "value count")?,
                    None,
                    by_dictionary(f[2]),
                )
            }
            Some(1) => (PageKind::Index, 0, None, false),
            Some(2) => {
                let f = fields(self.dictionary, "dictionary page")?;
                (
                    PageKind::Dictionary,
                    size(f[1], "value count")?,
                    None,
                    false,
                )
            }
            Some(3) => {
                let f = fields(self.v2, "v2 data page")?;
                let rows = size(f[3], "row count")?;
                let values = size(f[1], "value count")?;
                (PageKind::DataV2, values, Some(rows), by_dictionary(f[4]))
            }
            Some(k) => return Err(format!("its page type {k} is unknown")),
            None => return Err("it has no page type".into()),
        };
        Ok(Page {
            kind,
            offset,
            header_len,
            compressed,
            uncompressed,
            values,
            rows,
            dictionary_encoded,
        })
    }
}

/// Visit the pages of the column chunk at `chunk`, front to back, as the
/// Parquet crate's reader walks them: each header, then as many bytes of
/// data as it says, until the chunk ends. A header longer than
/// `header_limit` bytes is refused (a header is read whole by the
/// decoder). The error says where and what is wrong.
pub fn walk(
    read: &ReadAt,
    chunk: Range<u64>,
    header_limit: u64,
    visit: &mut dyn FnMut(Page) -> Result<(), String>,
) -> Result<(), String> {
    let mut cursor = Cursor {
        read,
        pos: chunk.start,
        end: chunk.end,
        window: Bytes::new(),
        window_at: chunk.start,
        step: FIRST_READ,
    };
    while cursor.pos < chunk.end {
        let at = cursor.pos;
        cursor.end = chunk.end.min(at.saturating_add(header_limit));
        // Reads grow within a header, not from one to the next: data
        // between headers is not wanted.
        cursor.step = FIRST_READ;
        let header = cursor.page().map_err(|e| {
            if cursor.end < chunk.end && cursor.pos >= cursor.end {
                format!("the page header at byte {at} is longer than {header_limit} bytes")
            } else {
                format!("the page header at byte {at} cannot be read: {e}")
            }
        })?;
        let page = header
            .page(at, cursor.pos - at)
            .map_err(|e| format!("the page header at byte {at} is invalid: {e}"))?;
        cursor.end = chunk.end;
        cursor.skip(page.compressed).map_err(|_| {
            format!(
                "the page at byte {at} claims {} bytes, past the end of its column chunk",
                page.compressed
            )
        })?;
        visit(page)?;
    }
    Ok(())
}

/// A column chunk's bytes in the file, or why the footer's are unusable
/// (the Parquet crate asserts on negative ones).
pub fn chunk_range(chunk: &ColumnChunkMetaData) -> Result<Range<u64>, String> {
    let start = chunk
        .dictionary_page_offset()
        .unwrap_or(chunk.data_page_offset());
    let len = chunk.compressed_size();
    match (u64::try_from(start), u64::try_from(len)) {
        (Ok(start), Ok(len)) => start
            .checked_add(len)
            .map(|end| start..end)
            .ok_or_else(|| "its byte range overflows".to_string()),
        _ => Err(format!(
            "the footer places it at byte {start} with length {len}"
        )),
    }
}

/// A page may hold this many lines' worth and be decoded: a page holds
/// many rows, and writers check its size only every thousand values or so
/// (DuckDB's pages reach 100 MB), so honest pages outgrow one line.
pub const PAGE_LINES: u64 = 8;

/// Pages a row group's chunks may list in an offset index of ours, in all:
/// more are not indexed (memory), and then no page of it can be skipped.
const MAX_INDEXED_PAGES: usize = 1 << 20;
/// Runs of pages not to decode a chunk may hold before its row group is
/// refused whole rather than page by page.
const MAX_OVER_PAGES: usize = 4096;

/// What one column chunk's page headers say, for deciding which rows of
/// its row group can be decoded.
#[derive(Debug, Default)]
pub struct ChunkPages {
    /// Bytes the decoder holds for its pages to decode.
    pub bytes: u64,
    /// Its pages to decode (all of them when nothing is skipped), merged
    /// where they touch: what to fetch of a remote chunk.
    pub needed: Vec<Range<u64>>,
    /// Why its pages cannot be read at all.
    error: Option<String>,
    /// Its data pages as an offset index lists them.
    locations: Vec<PageLocation>,
    /// Why `locations` is not an offset index of the chunk.
    unindexed: Option<String>,
    /// A dictionary page over the limit: never read; the data pages that
    /// need it are skipped, the others read without it.
    dictionary_over: Option<Page>,
    /// Data pages not to decode, with their rows in the row group when
    /// known: over the limit themselves, or needing `dictionary_over`.
    over: Vec<(Option<Range<u64>>, Page)>,
    /// Rows counted from the data pages so far (None once one does not say).
    rows: Option<u64>,
    /// Pages seen so far, and whether the first was a dictionary page.
    seen: u64,
    led_by_dictionary: bool,
}

impl ChunkPages {
    /// Read the page headers of `chunk`: `limit` is the most a page may
    /// hold to be decoded, `indexed` counts the pages its row group has
    /// listed so far.
    pub fn read(
        read: &ReadAt,
        chunk: &ColumnChunkMetaData,
        limit: u64,
        indexed: &mut usize,
    ) -> ChunkPages {
        let mut pages = ChunkPages {
            rows: Some(0),
            ..Default::default()
        };
        let range = match chunk_range(chunk) {
            Ok(r) => r,
            Err(e) => {
                pages.error = Some(e);
                return pages;
            }
        };
        let repeated = chunk.column_descr().max_rep_level() > 0;
        let walked = walk(read, range, limit, &mut |page| {
            pages.visit(page, repeated, limit, indexed);
            Ok(())
        });
        if let Err(e) = walked {
            pages.error = Some(e);
        }
        pages
    }

    fn visit(&mut self, page: Page, repeated: bool, limit: u64, indexed: &mut usize) {
        let is_data = matches!(page.kind, PageKind::Data | PageKind::DataV2);
        let skipped = page.bytes() > limit
            || (is_data && page.dictionary_encoded && self.dictionary_over.is_some());
        if !skipped {
            self.bytes = self.bytes.saturating_add(page.bytes());
            match self.needed.last_mut() {
                Some(last) if last.end == page.offset => last.end = page.range().end,
                _ => self.needed.push(page.range()),
            }
        }
        let seen = self.seen;
        self.seen += 1;
        let data_rows = match page.kind {
            PageKind::Index => {
                if self.locations.is_empty() {
                    self.unindex("an index page comes before its data pages");
                }
                return;
            }
            PageKind::Dictionary => {
                if seen == 0 {
                    self.led_by_dictionary = true;
                } else {
                    self.unindex("a dictionary page follows its first page");
                }
                if skipped {
                    self.dictionary_over.get_or_insert(page);
                }
                return;
            }
            PageKind::DataV2 => page.rows,
            PageKind::Data if !repeated => Some(page.values),
            PageKind::Data => None,
        };
        let first_row = self.rows;
        self.rows = first_row.zip(data_rows).and_then(|(a, b)| a.checked_add(b));
        let rows = first_row.zip(self.rows).map(|(a, b)| a..b);
        if self.rows.is_none() {
            self.unindex("it repeats values and its pages do not say which rows they hold");
        }
        if skipped {
            let runs = self.over.len();
            match (self.over.last_mut(), &rows) {
                // Runs of pages skipped are one entry (the first page kept).
                (Some((Some(last), _)), Some(r)) if last.end == r.start => last.end = r.end,
                _ if runs >= MAX_OVER_PAGES => {
                    self.error.get_or_insert_with(|| {
                        format!("more than {MAX_OVER_PAGES} runs of its pages cannot be decoded")
                    });
                }
                _ => self.over.push((rows.clone(), page.clone())),
            }
        }
        // An offset index takes all before its first data page for the
        // dictionary page: nothing else may come first.
        if self.locations.is_empty() && !(seen == 0 || (seen == 1 && self.led_by_dictionary)) {
            self.unindex("pages other than a dictionary come before its first data page");
        }
        if self.unindexed.is_some() {
            return;
        }
        let location = (*indexed < MAX_INDEXED_PAGES).then_some(()).and_then(|()| {
            Some(PageLocation {
                offset: i64::try_from(page.offset).ok()?,
                compressed_page_size: i32::try_from(page.header_len + page.compressed).ok()?,
                first_row_index: i64::try_from(rows?.start).ok()?,
            })
        });
        match location {
            Some(l) => {
                *indexed += 1;
                self.locations.push(l);
            }
            None => self.unindex("it has more pages than are indexed"),
        }
    }

    fn unindex(&mut self, why: &str) {
        self.unindexed.get_or_insert_with(|| why.to_string());
        // Of no use any more.
        self.locations = Vec::new();
    }

    /// Why a page of it is not decoded.
    fn why(&self, page: &Page, name: &GroupName, leaf: usize) -> String {
        match &self.dictionary_over {
            Some(dictionary) if page.bytes() <= name.limit => format!(
                "its pages of column {} need its dictionary page, which {}",
                (name.column)(leaf),
                name.over(dictionary)
            ),
            _ => format!(
                "its page of column {} {}",
                (name.column)(leaf),
                name.over(page)
            ),
        }
    }
}

/// What can be decoded of a row group.
#[derive(Debug)]
pub enum GroupPlan {
    /// Every row, as the file lays it out; `bytes` for its pages.
    Read { bytes: u64 },
    /// Every row but those in `skip` (rows within the group, and why), read
    /// page by page through `index` (an offset index for each of the
    /// file's leaves; empty for leaves not read), without the dictionary
    /// page of the leaves in `undictionaried`.
    Partial {
        bytes: u64,
        skip: Vec<(Range<u64>, String)>,
        index: Vec<OffsetIndexMetaData>,
        undictionaried: Vec<usize>,
    },
    /// No row: why.
    Reject(String),
}

/// Where a group's rows are in the file and how to name them.
pub struct GroupName<'a> {
    /// The group's number in the file (from 0).
    pub number: usize,
    /// The file row (from 1) of its first row.
    pub first_row: u64,
    /// A leaf column's name.
    pub column: &'a dyn Fn(usize) -> String,
    /// The page limit, for reasons.
    pub limit: u64,
}

impl GroupName<'_> {
    fn rows(&self, rows: &Range<u64>) -> String {
        let (a, b) = (self.first_row + rows.start, self.first_row + rows.end - 1);
        let group = self.number;
        if a == b {
            format!("row {a} (in row group {group})")
        } else {
            format!("rows {a}-{b} (row group {group})")
        }
    }

    fn over(&self, page: &Page) -> String {
        format!(
            "holds {} bytes, over the {}-byte limit for one page ({PAGE_LINES} x --max-line-bytes)",
            page.bytes(),
            self.limit
        )
    }
}

/// Decide what can be decoded of `group` from its read chunks' pages
/// (`chunks`: leaf, pages).
pub fn plan_group(
    group: &RowGroupMetaData,
    chunks: Vec<(usize, ChunkPages)>,
    name: &GroupName,
) -> GroupPlan {
    let rows = u64::try_from(group.num_rows()).unwrap_or(0);
    let all = 0..rows;
    let bytes = chunks
        .iter()
        .map(|(_, c)| c.bytes)
        .fold(0u64, u64::saturating_add);
    for (leaf, c) in &chunks {
        if let Some(e) = &c.error {
            return GroupPlan::Reject(format!(
                "{}: column {}: {e}; no row of the group was decoded",
                name.rows(&all),
                (name.column)(*leaf)
            ));
        }
    }
    let first_skipped = chunks.iter().find_map(|(leaf, c)| {
        let page = c
            .over
            .first()
            .map(|(_, p)| p)
            .or(c.dictionary_over.as_ref())?;
        Some(match &c.dictionary_over {
            Some(dictionary) => format!(
                "the dictionary page of column {} {}",
                (name.column)(*leaf),
                name.over(dictionary)
            ),
            None => format!(
                "a page of column {} {}",
                (name.column)(*leaf),
                name.over(page)
            ),
        })
    });
    let Some(first_skipped) = first_skipped else {
        return GroupPlan::Read { bytes };
    };
    // Pages of every chunk must be indexed by row to skip some of them.
    let unindexed = chunks.iter().find_map(|(leaf, c)| {
        let why = match (&c.unindexed, c.rows) {
            (Some(why), _) => why.clone(),
            (None, Some(r)) if r != rows => {
                format!("its pages hold {r} rows, the row group {rows}")
            }
            _ => return None,
        };
        Some(format!("column {}: {why}", (name.column)(*leaf)))
    });
    if let Some(why) = unindexed {
        return GroupPlan::Reject(format!(
            "{}: {first_skipped}, and which rows need it cannot be told without decoding \
             ({why}); no row of the group was decoded",
            name.rows(&all),
        ));
    }
    let mut over: Vec<(Range<u64>, String)> = chunks
        .iter()
        .flat_map(|(leaf, c)| {
            c.over.iter().filter_map(move |(r, page)| {
                let r = r.clone()?;
                Some((r, c.why(page, name, *leaf)))
            })
        })
        .filter(|(r, _)| !r.is_empty())
        .collect();
    over.sort_by_key(|(r, _)| (r.start, r.end));
    // Pages that touch or overlap (of one column or several): one range,
    // the first reason.
    let mut skip: Vec<(Range<u64>, String)> = Vec::new();
    for (r, why) in over {
        match skip.last_mut() {
            Some((last, _)) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => skip.push((r, why)),
        }
    }
    let skip = skip
        .into_iter()
        .map(|(r, why)| {
            let reason = format!("{}: {why}; not decoded", name.rows(&r));
            (r, reason)
        })
        .collect();
    let mut index: Vec<OffsetIndexMetaData> = (0..group.num_columns())
        .map(|_| OffsetIndexMetaData {
            page_locations: Vec::new(),
            unencoded_byte_array_data_bytes: None,
        })
        .collect();
    let mut undictionaried = Vec::new();
    for (leaf, c) in chunks {
        if c.dictionary_over.is_some() {
            undictionaried.push(leaf);
        }
        if let Some(slot) = index.get_mut(leaf) {
            slot.page_locations = c.locations;
        }
    }
    GroupPlan::Partial {
        bytes,
        skip,
        index,
        undictionaried,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{ArrayRef, Int64Array, ListArray, RecordBatch, StringArray};
    use datafusion::arrow::datatypes::{Field, Int64Type, Schema};
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
    use datafusion::parquet::basic::{Compression, ZstdLevel};
    use datafusion::parquet::file::metadata::PageIndexPolicy;
    use datafusion::parquet::file::properties::{WriterProperties, WriterVersion};
    use proptest::prelude::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Reads of `data`, counted.
    fn reader<'a>(
        data: &'a [u8],
        reads: &'a AtomicUsize,
    ) -> impl Fn(u64, usize) -> Result<Bytes, String> + 'a {
        move |offset, len| {
            reads.fetch_add(1, Ordering::Relaxed);
            let start = usize::try_from(offset)
                .map_err(|e| e.to_string())?
                .min(data.len());
            let end = start.saturating_add(len).min(data.len());
            Ok(Bytes::copy_from_slice(&data[start..end]))
        }
    }

    fn pages_of(data: &[u8], range: Range<u64>, limit: u64) -> Result<Vec<Page>, String> {
        let reads = AtomicUsize::new(0);
        let mut pages = Vec::new();
        walk(&reader(data, &reads), range, limit, &mut |p| {
            pages.push(p);
            Ok(())
        })?;
        Ok(pages)
    }

    /// Strings, nullable, and lists of numbers, in row groups of many pages.
    fn file(props: WriterProperties) -> Vec<u8> {
        let n = 3000usize;
        let text: ArrayRef =
            Arc::new(StringArray::from_iter((0..n).map(|i| {
                (i % 7 != 0).then(|| format!("value {} {}", i % 50, "x".repeat(i % 90)))
            })));
        let lists: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(
            (0..n).map(|i| Some((0..(i % 5) as i64).map(Some).collect::<Vec<_>>())),
        ));
        let numbers: ArrayRef = Arc::new(Int64Array::from_iter_values(0..n as i64));
        let schema = Arc::new(Schema::new(vec![
            Field::new("text", text.data_type().clone(), true),
            Field::new("lists", lists.data_type().clone(), true),
            Field::new("n", numbers.data_type().clone(), false),
        ]));
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, schema.clone(), Some(props)).unwrap();
        w.write(&RecordBatch::try_new(schema, vec![text, lists, numbers]).unwrap())
            .unwrap();
        w.close().unwrap();
        out
    }

    fn layouts() -> Vec<WriterProperties> {
        let mut all = Vec::new();
        for version in [WriterVersion::PARQUET_1_0, WriterVersion::PARQUET_2_0] {
            for compression in [
                Compression::UNCOMPRESSED,
                Compression::SNAPPY,
                Compression::ZSTD(ZstdLevel::default()),
            ] {
                for (dictionary, stats) in [(true, false), (false, true)] {
                    all.push(
                        WriterProperties::builder()
                            .set_writer_version(version)
                            .set_compression(compression)
                            .set_dictionary_enabled(dictionary)
                            .set_write_page_header_statistics(stats)
                            .set_max_row_group_row_count(Some(1000))
                            .set_data_page_row_count_limit(64)
                            .set_write_batch_size(64)
                            .build(),
                    );
                }
            }
        }
        all
    }

    #[test]
    fn page_headers_are_read_as_the_writer_indexed_them() {
        for props in layouts() {
            let what = format!("{props:?}");
            let data = file(props);
            let bytes = Bytes::from(data.clone());
            let options =
                ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required);
            let footer = ArrowReaderMetadata::load(&bytes, options).unwrap();
            let meta = footer.metadata();
            let index = meta.offset_index().expect("the writer's offset index");
            for (g, group) in meta.row_groups().iter().enumerate() {
                let mut indexed = 0;
                for (c, chunk) in group.columns().iter().enumerate() {
                    let range = chunk_range(chunk).unwrap();
                    let pages = pages_of(&data, range.clone(), 1 << 20).unwrap();
                    let written = &index[g][c].page_locations;
                    let data_pages: Vec<&Page> = pages
                        .iter()
                        .filter(|p| matches!(p.kind, PageKind::Data | PageKind::DataV2))
                        .collect();
                    assert!(data_pages.len() > 3, "{what}: pages {}", data_pages.len());
                    assert_eq!(data_pages.len(), written.len(), "{what}");
                    for (p, w) in data_pages.iter().zip(written) {
                        assert_eq!(p.offset as i64, w.offset, "{what}");
                        assert_eq!(
                            (p.header_len + p.compressed) as i64,
                            i64::from(w.compressed_page_size)
                        );
                    }
                    assert_eq!(pages.last().unwrap().range().end, range.end);
                    let bytes: u64 = pages.iter().map(|p| p.header_len + p.uncompressed).sum();
                    assert_eq!(bytes as i64, chunk.uncompressed_size(), "{what}");
                    let read = |o: u64, l: usize| Ok(bytes_at(&data, o, l));
                    let chunk_pages = ChunkPages::read(&read, chunk, 1 << 20, &mut indexed);
                    assert_eq!(chunk_pages.error, None, "{what}");
                    let repeated = c == 1;
                    let v2 = matches!(data_pages[0].kind, PageKind::DataV2);
                    if repeated && !v2 {
                        assert!(chunk_pages.unindexed.is_some(), "{what}");
                    } else {
                        assert_eq!(chunk_pages.unindexed, None, "{what}");
                        assert_eq!(&chunk_pages.locations, written, "{what}");
                        assert_eq!(chunk_pages.rows, Some(group.num_rows() as u64));
                    }
                }
            }
        }
    }

    fn bytes_at(data: &[u8], offset: u64, len: usize) -> Bytes {
        let start = (offset as usize).min(data.len());
        Bytes::copy_from_slice(&data[start..(start + len).min(data.len())])
    }

    /// A compact field header of a small delta.
    fn field(delta: u8, kind: u8) -> u8 {
        (delta << 4) | kind
    }

    fn zigzag(v: i32) -> Vec<u8> {
        let mut n = ((v << 1) ^ (v >> 31)) as u32;
        let mut out = Vec::new();
        loop {
            if n < 0x80 {
                out.push(n as u8);
                return out;
            }
            out.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
    }

    /// A v1 data page header of `values` values and these sizes, with
    /// `extra` (fields of ids 9..) before its end.
    fn header(uncompressed: i32, compressed: i32, values: i32, extra: &[u8]) -> Vec<u8> {
        let mut h = vec![field(1, I32)];
        h.extend(zigzag(0));
        h.push(field(1, I32));
        h.extend(zigzag(uncompressed));
        h.push(field(1, I32));
        h.extend(zigzag(compressed));
        h.push(field(2, STRUCT));
        h.push(field(1, I32));
        h.extend(zigzag(values));
        h.push(STOP);
        h.extend_from_slice(extra);
        h.push(STOP);
        h
    }

    #[test]
    fn a_page_header_is_read_with_the_fields_it_does_not_need_skipped() {
        // Field 9: a binary, a list of structs, a map, a bool, a double.
        let mut extra = vec![field(4, BINARY), 3, b'a', b'b', b'c'];
        extra.extend([
            field(1, LIST),
            (2 << 4) | STRUCT,
            STOP,
            field(1, I64),
            2,
            STOP,
        ]);
        extra.extend([field(1, MAP), 1, (BINARY << 4) | TRUE, 1, b'k', 1]);
        extra.extend([field(1, TRUE), field(1, DOUBLE), 0, 0, 0, 0, 0, 0, 0, 0]);
        let mut data = header(100, 5, 10, &extra);
        let header_len = data.len() as u64;
        data.extend([0; 5]);
        let pages = pages_of(&data, 0..data.len() as u64, 1 << 20).unwrap();
        assert_eq!(
            pages,
            [Page {
                kind: PageKind::Data,
                offset: 0,
                header_len,
                compressed: 5,
                uncompressed: 100,
                values: 10,
                rows: None,
                dictionary_encoded: false,
            }]
        );
    }

    #[test]
    fn crafted_headers_are_refused_with_where_and_why() {
        let refused = |data: &[u8], limit: u64| {
            let e = pages_of(data, 0..data.len() as u64, limit).unwrap_err();
            assert!(e.contains("byte 0"), "{e}");
            e
        };
        // Sizes past the chunk, negative, missing.
        let e = refused(&header(10, 50, 1, &[]), 1 << 20);
        assert!(e.contains("past the end"), "{e}");
        let mut data = header(-1, 0, 1, &[]);
        data.push(0);
        assert!(refused(&data, 1 << 20).contains("uncompressed size is -1"));
        assert!(refused(&[field(1, I32), 0, STOP], 1 << 20).contains("no uncompressed size"));
        // A number of eleven bytes.
        let mut long = vec![field(1, I32)];
        long.extend([0xff; 11]);
        assert!(refused(&long, 1 << 20).contains("longer than 10 bytes"));
        // Structs nested without end.
        let mut deep = vec![field(9, STRUCT)];
        deep.extend(vec![field(1, STRUCT); 1000]);
        assert!(refused(&deep, 1 << 20).contains("nests deeper"));
        // A list claiming more elements than there are bytes ends with them.
        let mut list = vec![field(9, LIST), 0xf0 | I64];
        list.extend([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
        assert!(refused(&list, 1 << 20).contains("runs past the end"));
        // A header longer than the limit.
        let mut huge = vec![field(9, BINARY), 0xac, 0x02];
        huge.extend(vec![0u8; 300]);
        let e = refused(&huge, 64);
        assert!(e.contains("longer than 64 bytes"), "{e}");
        // A field of the wrong type where the page size is.
        assert!(refused(&[field(2, BINARY), 0, STOP], 1 << 20).contains("wrong type"));
    }

    #[test]
    fn a_binary_in_a_header_is_skipped_without_reading_it() {
        // A header with 1 MiB of statistics: its bytes are never asked for.
        let mut stats = vec![field(9, BINARY)];
        let n = 1u32 << 20;
        let mut v = n;
        while v >= 0x80 {
            stats.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        stats.push(v as u8);
        let head = header(10, 4, 2, &[]);
        let mut data = head[..head.len() - 1].to_vec();
        data.extend(&stats);
        data.extend(vec![0u8; n as usize]);
        data.push(STOP);
        data.extend([1, 2, 3, 4]);
        let reads = AtomicUsize::new(0);
        let mut pages = Vec::new();
        walk(
            &reader(&data, &reads),
            0..data.len() as u64,
            4 << 20,
            &mut |p| {
                pages.push(p);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(pages.len(), 1);
        assert_eq!(pages[0].header_len, data.len() as u64 - 4);
        assert!(
            reads.load(Ordering::Relaxed) <= 4,
            "{} reads",
            reads.load(Ordering::Relaxed)
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Any bytes: an answer, never a panic, in reads bounded by the
        /// chunk's size.
        #[test]
        fn any_bytes_are_walked_or_refused(data in proptest::collection::vec(any::<u8>(), 0..300), limit in 1u64..400) {
            let reads = AtomicUsize::new(0);
            let _ = walk(&reader(&data, &reads), 0..data.len() as u64, limit, &mut |_| Ok(()));
            prop_assert!(reads.load(Ordering::Relaxed) <= data.len() + 1);
        }

        /// A real column chunk with bytes changed: the same.
        #[test]
        fn changed_headers_are_walked_or_refused(at in 0usize..4000, to in any::<u8>(), more in proptest::collection::vec((0usize..4000, any::<u8>()), 0..4)) {
            let mut data = crafted_base().clone();
            let n = data.len();
            data[at % n] = to;
            for (at, to) in more {
                data[at % n] = to;
            }
            let reads = AtomicUsize::new(0);
            let _ = walk(&reader(&data, &reads), 4..n as u64, 1 << 16, &mut |_| Ok(()));
            prop_assert!(reads.load(Ordering::Relaxed) <= n);
        }
    }

    /// A small file of several pages per chunk.
    fn crafted_base() -> &'static Vec<u8> {
        static BASE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        BASE.get_or_init(|| {
            file(
                WriterProperties::builder()
                    .set_write_page_header_statistics(true)
                    .set_data_page_row_count_limit(500)
                    .set_write_batch_size(500)
                    .build(),
            )
        })
    }
}
