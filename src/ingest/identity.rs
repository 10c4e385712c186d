//! What an event is known by (docs/protocol.md, identity): its id's text,
//! looked up through a key no log can aim at, and its JSON value, hashed
//! into a digest no log can forge.

use std::hash::BuildHasher;
use std::sync::LazyLock;

/// The id's text hashed with a key drawn at random when the process starts
/// (SipHash): whoever writes the log cannot make ids share a key on
/// purpose, so the redelivery table keeps its speed on a hostile log. A key
/// is never taken as the id: ids sharing one are told apart by their text.
pub fn id_key(id: &str) -> u64 {
    static KEYS: LazyLock<std::hash::RandomState> = LazyLock::new(std::hash::RandomState::new);
    KEYS.hash_one(id)
}

/// The 128-bit digest of a canonical text (or of a rejected line's bytes):
/// BLAKE3, whose collisions no one can construct, so that no log line can
/// take another's identity or a finding's fingerprint.
pub fn digest(bytes: &[u8]) -> [u8; 16] {
    let hash = blake3::hash(bytes);
    let mut out = [0u8; 16];
    out.copy_from_slice(&hash.as_bytes()[..16]);
    out
}
