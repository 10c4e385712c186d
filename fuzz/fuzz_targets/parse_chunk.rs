//! A chunk of raw bytes (any number of lines, any bytes) -> events and bad
//! lines. Every non-blank line must be accounted for exactly once.
#![no_main]

use datafusion::arrow::array::Array;
use hvaudit::ingest::ndjson::{Chunk, ChunkLimits, parse_chunk};
use hvaudit::ingest::normalize::NormalizeOptions;
use hvaudit::ingest::row::ChunkShape;
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

fuzz_target!(|data: &[u8]| {
    // A small cap, so the over-long-line path is reached too.
    let max_line = 2048;
    let chunk = Chunk {
        file_idx: 0,
        chunk_idx: 0,
        first_line: 1,
        data: data.to_vec(),
        oversized: None,
    };
    let parsed = parse_chunk(
        &chunk,
        Arc::from("fuzz.ndjson"),
        ChunkLimits::lines(max_line),
        NormalizeOptions::default(),
        &mut ChunkShape::default(),
    );
    let events = parsed.keys.len() as u64;
    assert_eq!(parsed.events.len() as u64, events);
    assert_eq!(
        parsed.lines,
        events + parsed.bad.len() as u64,
        "every line counted once"
    );
    let body = data.strip_suffix(b"\n").unwrap_or(data);
    let pieces = if data.is_empty() {
        0
    } else {
        body.split(|b| *b == b'\n').count() as u64
    };
    assert_eq!(parsed.lines + parsed.blank, pieces);
    for b in &parsed.bad {
        assert!(
            b.line >= 1 && b.line <= pieces,
            "bad line {} of {pieces}",
            b.line
        );
        assert!(!b.reason.is_empty());
        assert!(
            !b.excerpt.chars().any(char::is_control),
            "excerpt is printable"
        );
    }
    // Laying the rows out as a batch keeps every one of them, and every
    // column is valid Arrow: the text and all-null columns are built
    // without Arrow's checks (`unsafe`), so they are checked here.
    let batch = parsed.events.finish();
    assert_eq!(batch.num_rows() as u64, events);
    for column in batch.columns() {
        column.to_data().validate_full().expect("a valid column");
    }
});
