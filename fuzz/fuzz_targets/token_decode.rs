//! Structured handoff tokens: the raw text, and the input wrapped as the
//! base64url claims of a bare and of a three-segment token, so the JSON
//! and claim checks behind the base64 layer are reached directly.
#![no_main]

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hvaudit::ingest::token::decode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = decode(text);
    }
    let body = URL_SAFE_NO_PAD.encode(data);
    let bare = decode(&body);
    let compact = decode(&format!("hdr.{body}.sig"));
    // The same claims decode the same way in both forms.
    assert_eq!(bare, compact);
});
