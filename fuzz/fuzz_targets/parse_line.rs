//! One NDJSON line -> a normalized row, or a rejection with a reason.
//! Both token formats, so structured-token decoding runs on every row.
#![no_main]

use hvaudit::ingest::normalize::{NormalizeOptions, parse_line};
use hvaudit::protocol::TokenFormat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    for token_format in [TokenFormat::Opaque, TokenFormat::Structured] {
        let opts = NormalizeOptions { token_format };
        let mut taken = false;
        let parsed = parse_line(line, 7, 1, opts, |row| {
            // An accepted line has the required envelope fields.
            assert!(!row.id.is_empty() && !row.type_.is_empty());
            assert!(!row.source.is_empty());
            taken = true;
        });
        match parsed {
            Ok(_) => assert!(taken, "an accepted line hands over its row"),
            Err(r) => {
                assert!(!taken, "a rejected line hands over no row");
                assert!(!r.reason.is_empty(), "a rejection says why");
            }
        }
    }
});
