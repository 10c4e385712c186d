//! Whether a file in `convert`'s layout is one `convert` wrote: its bytes
//! against the MAC file beside it, with the store key (`store_key`).
//! Only such a file's stored claims (locations, redelivery counts,
//! digests) are believed; see `parquet::open` and `in_place::scan_inputs`.

use super::inputs::Input;
use crate::store_key::{
    self, KeySource, MAC_FILE_LIMIT, MAC_PREFIX, MAC_SUFFIX, Signed, StoreKey, Unauthenticated,
};
use std::io::Read;

/// Check `input` (a local file or an object) against its MAC file.
pub fn authenticate(input: &Input, keys: &KeySource) -> Result<(), Unauthenticated> {
    let key = match keys.key() {
        Ok(Some(key)) => key,
        Ok(None) => {
            return Err(Unauthenticated::Missing(format!(
                "there is no store key to check it with (give the key convert used: {}, or \
                 its key file at {})",
                store_key::ENV,
                store_key::key_file()
                    .map(|p| crate::ingest::inputs::shown_path(&p))
                    .unwrap_or_else(|| "~/.config/hvaudit/store.key".into())
            )));
        }
        Err(e) => return Err(Unauthenticated::Failed(e)),
    };
    let (text, len, mac) = match &input.object {
        Some(object) => object_mac(object, &key)?,
        None => file_mac(input, &key)?,
    };
    store_key::check(&key, Signed::Part, &text, len, &mac)
}

fn missing(part: &str) -> Unauthenticated {
    Unauthenticated::Missing(format!(
        "no MAC file of convert's lies beside it (restore {MAC_PREFIX}{part}{MAC_SUFFIX} with it, or \
         convert the logs again)"
    ))
}

fn unreadable(e: impl std::fmt::Display) -> Unauthenticated {
    Unauthenticated::Failed(format!("its MAC cannot be checked: {e}"))
}

/// The MAC file's text, and the length and MAC of the file's bytes.
type Checked = (String, u64, blake3::Hash);

fn file_mac(input: &Input, key: &StoreKey) -> Result<Checked, Unauthenticated> {
    let mac_file = store_key::mac_path(&input.path);
    let text = match crate::operator_files::read_text(&mac_file, MAC_FILE_LIMIT) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let name = input.path.file_name().unwrap_or_default().to_string_lossy();
            return Err(missing(&name));
        }
        Err(e) => return Err(unreadable(e)),
    };
    let file = input.open_file().map_err(unreadable)?;
    let (len, mac) = store_key::mac_of_file(key, Signed::Part, &file).map_err(unreadable)?;
    Ok((text, len, mac))
}

fn object_mac(
    object: &crate::object_storage::RemoteObject,
    key: &StoreKey,
) -> Result<Checked, Unauthenticated> {
    let name = object.location.filename().unwrap_or_default();
    let text = match object.sibling(&format!("{MAC_PREFIX}{name}{MAC_SUFFIX}"), MAC_FILE_LIMIT) {
        Ok(Some(bytes)) => String::from_utf8(bytes.to_vec()).map_err(unreadable)?,
        Ok(None) => return Err(missing(name)),
        Err(e) => return Err(unreadable(e)),
    };
    let mut hasher = key.hasher(Signed::Part);
    let mut reader = object.reader_from(0);
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        let n = reader.read(&mut buf).map_err(unreadable)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        len += n as u64;
    }
    Ok((text, len, hasher.finalize()))
}

/// [`authenticate`] for each of `inputs`, the files hashed on one thread
/// per core (a store is read whole once).
pub fn authenticate_each(inputs: &[Input], keys: &KeySource) -> Vec<Result<(), Unauthenticated>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // Looked up once, not by every thread.
    let keys = match keys.key() {
        Ok(Some(key)) => KeySource::Given(key),
        Ok(None) => KeySource::None,
        Err(e) => {
            return inputs
                .iter()
                .map(|_| Err(Unauthenticated::Failed(e.clone())))
                .collect();
        }
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(inputs.len());
    let next = AtomicUsize::new(0);
    let mut results: Vec<(usize, Result<(), Unauthenticated>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let at = next.fetch_add(1, Ordering::Relaxed);
                        let Some(input) = inputs.get(at) else {
                            return done;
                        };
                        done.push((at, authenticate(input, &keys)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a MAC check does not panic"))
            .collect()
    });
    results.sort_by_key(|(at, _)| *at);
    results.into_iter().map(|(_, r)| r).collect()
}
