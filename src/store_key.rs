//! The key that authenticates `convert`'s Parquet. A file in convert's
//! layout carries claims no line can check (where each event was read,
//! how often it was redelivered, the digest its fingerprints come from),
//! so its rows are believed only when a keyed MAC, written beside it by
//! `convert` and checked with a key kept outside the audited tree, shows
//! that hvaudit wrote those very bytes. Anyone who can write the logs but
//! not read the key cannot forge one.
//!
//! The key is `HVAUDIT_STORE_KEY` (64 hex digits), else the file
//! `$XDG_CONFIG_HOME/hvaudit/store.key` (`~/.config/hvaudit/store.key`),
//! which the first `convert` makes (mode 0600). A cluster's client and a
//! second machine that audit the store need the same key.
//!
//! Each part's MAC is in `.hvaudit-NAME.mac` beside it: a hidden file that
//! a walk passes over, that copies (`cp -r`, `aws s3 sync`) carry with the
//! part, and that `*.parquet` globs (DuckDB, polars) do not take.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The variable that gives the key (64 hex digits) instead of the file.
pub const ENV: &str = "HVAUDIT_STORE_KEY";

/// The MAC file of a part is its file name between these.
pub const MAC_PREFIX: &str = ".hvaudit-";
pub const MAC_SUFFIX: &str = ".mac";

/// What a MAC file holds: one line of this tag and its fields.
const MAC_TAG: &str = "hvaudit-mac v1";

/// What a MAC vouches for. The kind is hashed with the bytes, so a MAC of
/// one kind never passes for the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signed {
    /// A file of convert's layout: its stored claims are believed.
    Part,
    /// A file hvaudit wrote for its user (a report, rejected lines, a
    /// query's result): a walk passes it over as not a log.
    Output,
}

impl Signed {
    fn name(self) -> &'static str {
        match self {
            Signed::Part => "part",
            Signed::Output => "output",
        }
    }
}

/// The secret, as the MAC uses it, and a short public name of it.
#[derive(Clone)]
pub struct StoreKey {
    mac_key: [u8; 32],
    id: String,
}

impl fmt::Debug for StoreKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreKey({})", self.id)
    }
}

impl StoreKey {
    fn from_secret(secret: &[u8; 32]) -> StoreKey {
        let id = blake3::derive_key("hvaudit store key id v1", secret);
        StoreKey {
            mac_key: blake3::derive_key("hvaudit convert part MAC v1", secret),
            id: hex(&id[..8]),
        }
    }

    /// A key from its 64 hex digits.
    pub fn from_hex(text: &str) -> Result<StoreKey, String> {
        let text = text.trim();
        let bytes = unhex(text).filter(|b| b.len() == 32).ok_or_else(|| {
            "a store key is 64 hexadecimal digits (32 bytes); make one with `head -c 32 \
             /dev/urandom | xxd -p -c 64`, or let `hvaudit convert` make the key file"
                .to_string()
        })?;
        Ok(StoreKey::from_secret(
            &bytes.try_into().expect("32 bytes checked"),
        ))
    }

    /// A fresh random key, for tables this process writes and reads back
    /// itself (a log read to disk).
    pub fn ephemeral() -> Result<StoreKey, String> {
        Ok(StoreKey::from_secret(&random_secret()?))
    }

    /// A short name of the key, safe to show: which key a MAC was made with.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The keyed hash the bytes of a file of `kind` are fed to.
    pub fn hasher(&self, kind: Signed) -> blake3::Hasher {
        let mut hasher = blake3::Hasher::new_keyed(&self.mac_key);
        hasher.update(format!("hvaudit {}\0", kind.name()).as_bytes());
        hasher
    }

    /// The MAC file's text for a file of `kind` and `len` bytes that
    /// hashed to `mac`.
    pub fn mac_text(&self, kind: Signed, len: u64, mac: &blake3::Hash) -> String {
        format!(
            "{MAC_TAG} kind={} key={} bytes={len} mac={}\n",
            kind.name(),
            self.id,
            mac.to_hex()
        )
    }

    /// The key of this environment, for reading: `HVAUDIT_STORE_KEY`, else
    /// the key file if there is one (None: no key, so no part is
    /// authenticated).
    pub fn for_reading() -> Result<Option<StoreKey>, String> {
        if let Some(hex) = std::env::var_os(ENV) {
            let hex = hex
                .into_string()
                .map_err(|_| format!("{ENV} is not text"))?;
            return StoreKey::from_hex(&hex)
                .map(Some)
                .map_err(|e| format!("{ENV}: {e}"));
        }
        match key_file() {
            Some(path) if path.exists() => read_key_file(&path).map(Some),
            _ => Ok(None),
        }
    }

    /// The key of this environment, for `convert`: as for reading, and the
    /// key file made when there is none (with what to say about it).
    pub fn for_writing() -> Result<(StoreKey, Option<String>), String> {
        if let Some(key) = StoreKey::for_reading()? {
            return Ok((key, None));
        }
        let path = key_file().ok_or_else(|| {
            format!("no store key: set {ENV} (64 hex digits), or HOME for the key file")
        })?;
        let key = make_key_file(&path)?;
        let note = format!(
            "hvaudit: made the store key {} (mode 0600), which authenticates the files \
             hvaudit writes (convert's Parquet, reports); an audit of them elsewhere needs \
             it (copy it, or set {ENV})",
            crate::escape::shown_path(&path)
        );
        Ok((key, Some(note)))
    }
}

/// Where the key comes from for a run: given, or looked up in the
/// environment once, when a file of convert's layout is first met (a run
/// that reads only NDJSON never looks).
#[derive(Debug, Clone, Default)]
pub enum KeySource {
    /// `HVAUDIT_STORE_KEY`, else the key file.
    #[default]
    Environment,
    Given(StoreKey),
    /// No key: no file is authenticated.
    None,
    /// Looked up already (shared by the clones of one run's options).
    Resolved(Arc<OnceLock<Result<Option<StoreKey>, String>>>),
}

impl KeySource {
    /// The environment's key, looked up at most once for all clones.
    pub fn lazy() -> KeySource {
        KeySource::Resolved(Arc::default())
    }

    pub fn key(&self) -> Result<Option<StoreKey>, String> {
        match self {
            KeySource::Environment => StoreKey::for_reading(),
            KeySource::Given(key) => Ok(Some(key.clone())),
            KeySource::None => Ok(None),
            KeySource::Resolved(cell) => cell.get_or_init(StoreKey::for_reading).clone(),
        }
    }
}

/// `$XDG_CONFIG_HOME/hvaudit/store.key`, else `$HOME/.config/...`.
pub fn key_file() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(config.join("hvaudit").join("store.key"))
}

fn read_key_file(path: &Path) -> Result<StoreKey, String> {
    use std::os::unix::fs::MetadataExt;
    let shown = crate::escape::shown_path(path);
    let file = crate::operator_files::open_regular(path)
        .map_err(|e| format!("cannot read the store key {shown}: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read the store key {shown}: {e}"))?;
    // Another user who can read the key can forge what it authenticates.
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "the store key {shown} can be read or written by other users, who could forge \
             what it authenticates; run `chmod 600 {shown}`"
        ));
    }
    let mut text = String::new();
    file.take(1024)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read the store key {shown}: {e}"))?;
    StoreKey::from_hex(&text).map_err(|e| format!("{shown}: {e}"))
}

/// Make the key file (and its directory, mode 0700) with a new key. Two
/// runs making it at once agree: it is written aside and linked into
/// place, never over a key another run made.
fn make_key_file(path: &Path) -> Result<StoreKey, String> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let shown = crate::escape::shown_path(path);
    let failed = |e: std::io::Error| {
        format!("cannot make the store key {shown}: {e}; set {ENV} (64 hex digits) instead")
    };
    let dir = path.parent().expect("a key file has a directory");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(failed)?;
    let secret = random_secret()?;
    let mut temp = tempfile::Builder::new()
        .prefix(".store.key.")
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(failed)?;
    writeln!(temp, "{}", hex(&secret)).map_err(failed)?;
    temp.as_file().sync_all().map_err(failed)?;
    match std::fs::hard_link(temp.path(), path) {
        Ok(()) => Ok(StoreKey::from_secret(&secret)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_key_file(path),
        Err(e) => Err(failed(e)),
    }
}

fn random_secret() -> Result<[u8; 32], String> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret)
        .map_err(|e| format!("cannot draw a random store key from the system: {e}"))?;
    Ok(secret)
}

/// The MAC file beside `part` (a path or an object URL).
pub fn mac_path(part: &Path) -> PathBuf {
    let name = part.file_name().unwrap_or_default().to_string_lossy();
    part.with_file_name(format!("{MAC_PREFIX}{name}{MAC_SUFFIX}"))
}

/// Why a part is not believed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unauthenticated {
    /// No MAC file, or no key: the part is read as Parquet from elsewhere
    /// (or refused where it cannot be).
    Missing(String),
    /// A MAC that does not match: the part was changed, or made with
    /// another key. The run stops.
    Failed(String),
}

/// Check the MAC file's `text` against a part of `len` bytes that hashed
/// (with `key`) to `mac`.
pub fn check(
    key: &StoreKey,
    kind: Signed,
    text: &str,
    len: u64,
    mac: &blake3::Hash,
) -> Result<(), Unauthenticated> {
    let fields = parse_mac(text)
        .ok_or_else(|| Unauthenticated::Failed("its MAC file is not one hvaudit writes".into()))?;
    if fields.kind != kind.name() {
        return Err(Unauthenticated::Failed(format!(
            "its MAC file vouches for another kind of file ({}, not {})",
            fields.kind,
            kind.name()
        )));
    }
    if fields.key != key.id {
        return Err(Unauthenticated::Failed(format!(
            "its MAC was made with another store key (key {}; this run's is key {}): give the \
             key convert used ({ENV}, or its key file), or convert the logs again",
            fields.key, key.id
        )));
    }
    // Compared in constant time (blake3::Hash's own equality).
    let claimed = blake3::Hash::from_hex(&fields.mac)
        .map_err(|_| Unauthenticated::Failed("its MAC file is not one hvaudit writes".into()))?;
    if fields.bytes != len || claimed != *mac {
        return Err(Unauthenticated::Failed(
            "its bytes are not those convert wrote (the MAC does not match): the file was \
             changed or replaced after convert; convert the logs again"
                .into(),
        ));
    }
    Ok(())
}

struct MacFields {
    kind: String,
    key: String,
    bytes: u64,
    mac: String,
}

fn parse_mac(text: &str) -> Option<MacFields> {
    let rest = text.strip_suffix('\n')?.strip_prefix(MAC_TAG)?;
    let mut parts = rest.split(' ');
    parts.next().filter(|p| p.is_empty())?;
    let kind = parts.next()?.strip_prefix("kind=")?.to_string();
    let key = parts.next()?.strip_prefix("key=")?.to_string();
    let bytes = parts.next()?.strip_prefix("bytes=")?.parse().ok()?;
    let mac = parts.next()?.strip_prefix("mac=")?.to_string();
    parts.next().is_none().then_some(MacFields {
        kind,
        key,
        bytes,
        mac,
    })
}

/// Bytes of a MAC file read at most (it is one short line).
pub const MAC_FILE_LIMIT: u64 = 256;

/// The MAC (as `kind`) of the local file behind `file`, read from its
/// start to its end, and its length.
pub fn mac_of_file(
    key: &StoreKey,
    kind: Signed,
    file: &std::fs::File,
) -> std::io::Result<(u64, blake3::Hash)> {
    use std::os::unix::fs::FileExt;
    let mut hasher = key.hasher(kind);
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    loop {
        let n = file.read_at(&mut buf, at)?;
        if n == 0 {
            return Ok((at, hasher.finalize()));
        }
        hasher.update(&buf[..n]);
        at += n as u64;
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// A `Write` that passes bytes on and feeds them to a keyed hash, so a
/// part's MAC is made as it is written, with no second read.
pub struct Macced<W> {
    pub inner: W,
    /// None when there is no key to hash for.
    hasher: Option<blake3::Hasher>,
    len: u64,
}

impl<W> Macced<W> {
    pub fn new(inner: W, key: &StoreKey, kind: Signed) -> Macced<W> {
        Macced {
            inner,
            hasher: Some(key.hasher(kind)),
            len: 0,
        }
    }

    /// A writer with no key to hash for: it hashes nothing and has no MAC.
    pub fn unkeyed(inner: W) -> Macced<W> {
        Macced {
            inner,
            hasher: None,
            len: 0,
        }
    }

    /// The bytes written so far and their MAC (None without a key).
    pub fn mac(&self) -> Option<(u64, blake3::Hash)> {
        Some((self.len, self.hasher.as_ref()?.finalize()))
    }
}

impl<W: std::io::Write> std::io::Write for Macced<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        if let Some(hasher) = &mut self.hasher {
            hasher.update(&buf[..n]);
        }
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    #[test]
    fn a_writer_without_a_key_passes_its_bytes_on_and_has_no_mac() {
        let mut w = Macced::unkeyed(Vec::new());
        std::io::Write::write_all(&mut w, b"report").unwrap();
        assert_eq!(w.mac(), None);
        assert_eq!(w.inner, b"report");
    }

    #[test]
    fn a_mac_file_matches_only_its_bytes_under_its_key() {
        let key = StoreKey::from_hex(KEY).unwrap();
        let mac = |data: &[u8], key: &StoreKey| {
            let mut w = Macced::new(Vec::new(), key, Signed::Part);
            std::io::Write::write_all(&mut w, data).unwrap();
            w.mac().unwrap()
        };
        let (len, m) = mac(b"PAR1 rows PAR1", &key);
        let text = key.mac_text(Signed::Part, len, &m);
        assert_eq!(check(&key, Signed::Part, &text, len, &m), Ok(()));
        // The same bytes vouched for as an output do not pass as a part.
        let mut w = Macced::new(Vec::new(), &key, Signed::Output);
        std::io::Write::write_all(&mut w, b"PAR1 rows PAR1").unwrap();
        let (_, as_output) = w.mac().unwrap();
        assert_ne!(as_output, m);
        let text_out = key.mac_text(Signed::Output, len, &as_output);
        assert!(check(&key, Signed::Part, &text_out, len, &as_output).is_err());
        // Relabelled, it is checked against the bytes hashed as a part.
        let relabelled = text_out.replace("kind=output", "kind=part");
        assert!(check(&key, Signed::Part, &relabelled, len, &m).is_err());
        // One byte changed, one byte more, another key: all refused.
        let (len2, m2) = mac(b"PAR1 rowz PAR1", &key);
        assert!(matches!(
            check(&key, Signed::Part, &text, len2, &m2),
            Err(Unauthenticated::Failed(_))
        ));
        let (len3, m3) = mac(b"PAR1 rows PAR1 ", &key);
        assert!(matches!(
            check(&key, Signed::Part, &text, len3, &m3),
            Err(Unauthenticated::Failed(_))
        ));
        let other = StoreKey::ephemeral().unwrap();
        let e = check(
            &other,
            Signed::Part,
            &text,
            len,
            &mac(b"PAR1 rows PAR1", &other).1,
        )
        .unwrap_err();
        assert!(format!("{e:?}").contains("another store key"), "{e:?}");
        // A MAC file with a field too many, or none, is not ours.
        for bad in [
            text.replace('\n', " x\n"),
            String::new(),
            text.replace("v1", "v2"),
        ] {
            assert!(matches!(
                check(&key, Signed::Part, &bad, len, &m),
                Err(Unauthenticated::Failed(_))
            ));
        }
    }

    #[test]
    fn keys_are_64_hex_digits_and_their_id_does_not_show_them() {
        let key = StoreKey::from_hex(KEY).unwrap();
        assert_eq!(key.id().len(), 16);
        assert!(!KEY.contains(key.id()));
        assert!(!format!("{key:?}").contains(&KEY[..16]));
        for bad in [
            "",
            "00",
            &KEY[..63],
            &format!("{KEY}00"),
            &KEY.replace('0', "g"),
        ] {
            assert!(StoreKey::from_hex(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_key_file_is_made_private_and_refused_when_others_can_read_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cfg/hvaudit/store.key");
        let made = make_key_file(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(read_key_file(&path).unwrap().id(), made.id());
        // A second make keeps the first key.
        assert_eq!(make_key_file(&path).unwrap().id(), made.id());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = read_key_file(&path).unwrap_err();
        assert!(e.contains("chmod 600"), "{e}");
    }
}
