//! Logs where they live: objects named by URL (`s3://`, `gs://`, `az://`,
//! `abfs(s)://`, `http(s)://`), read through the `object_store` crate that
//! DataFusion reads Parquet with, so the loaded read, `--in-place` scans and
//! a cluster's executors all reach the same objects.
//!
//! NDJSON is streamed in ranged reads of `BLOCK` bytes, `READS_AHEAD` of
//! them in flight, so memory stays bounded whatever the object's size; Parquet is read by
//! ranges (the footer, then the column chunks a reader needs). Every read
//! is retried with backoff by the store; one that finally fails names the
//! object and the offset.
//!
//! Credentials come the way each ecosystem sets them (the store builders'
//! `from_env`: `AWS_*`, `GOOGLE_*`, `AZURE_*`), plus the AWS profile files
//! that the AWS tools share. Nothing secret is ever shown: URLs are shown
//! without user info or query, and store errors lose their query strings.

use crate::log_format::{LogFormat, Skipped, sniff};
use datafusion::execution::object_store::{DefaultObjectStoreRegistry, ObjectStoreRegistry};
use datafusion::parquet::file::reader::{ChunkReader, Length};
use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, RetryConfig};
use std::collections::HashMap;
use std::io::Read;
use std::sync::{Arc, Mutex, OnceLock};
use url::Url;

/// URL schemes read as objects.
const SCHEMES: [&str; 9] = [
    "s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "http", "https",
];

/// Bytes asked for in one ranged read of an NDJSON object.
const BLOCK: u64 = 8 << 20;

/// Whether a command-line argument names an object rather than a local path.
pub fn is_url(arg: &str) -> bool {
    arg.split_once("://")
        .is_some_and(|(scheme, _)| SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()))
}

/// One object to read: its store, its key there, its size and the URL shown
/// for it (without credentials or query).
#[derive(Clone)]
pub struct RemoteObject {
    pub store: Arc<dyn ObjectStore>,
    pub location: ObjectPath,
    pub size: u64,
    pub url: String,
}

impl std::fmt::Debug for RemoteObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

/// An argument split into its store (`base`, e.g. `s3://bucket`) and the
/// key inside it, which may hold glob characters.
struct Named {
    base: Url,
    key: String,
    /// The URL as shown: no user info, no query.
    shown: String,
}

fn parse(arg: &str) -> Result<Named, String> {
    let (scheme, rest) = arg.split_once("://").expect("is_url checked");
    let scheme = scheme.to_ascii_lowercase();
    let (authority, key) = rest.split_once('/').unwrap_or((rest, ""));
    if authority.is_empty() {
        return Err(format!(
            "no bucket or host in the URL; write it as {scheme}://BUCKET/KEY"
        ));
    }
    let web = scheme == "http" || scheme == "https";
    // Object keys never carry a query; a web URL's query is not supported
    // (it is never shown either: it may hold a token).
    let key = match key.split_once(['?', '#']) {
        Some((k, _)) if web => {
            return Err(format!(
                "a query string or fragment in an {scheme}:// URL is not supported; name the \
                 object by its plain URL ({scheme}://{authority}/{k})"
            ));
        }
        _ => key,
    };
    let base = Url::parse(&format!("{scheme}://{authority}/"))
        .map_err(|e| format!("not a valid URL: {e}"))?;
    let host = base.host_str().unwrap_or_default();
    let port = base.port().map(|p| format!(":{p}")).unwrap_or_default();
    // abfs://CONTAINER@ACCOUNT...: the container is the user part.
    let user = match scheme.as_str() {
        "abfs" | "abfss" if !base.username().is_empty() => format!("{}@", base.username()),
        _ => String::new(),
    };
    let shown = format!("{scheme}://{user}{host}{port}/{key}");
    Ok(Named {
        base,
        key: key.to_string(),
        shown,
    })
}

/// What an object-store argument expands to, and what was passed over.
pub struct Expanded {
    pub objects: Vec<RemoteObject>,
    pub skipped: Vec<Skipped>,
}

/// Why an object-store argument cannot be read (the run stops, exit 2).
#[derive(Debug)]
pub struct RemoteError {
    pub url: String,
    pub reason: String,
    /// Nothing is there: no object, and none below it as a prefix.
    pub missing: bool,
}

/// Expand one argument: a single object, a prefix (`s3://b/logs/`, every
/// log object below it, like a directory), or a glob on keys
/// (`s3://b/logs/2026-07-*.ndjson.zst`, `*` not crossing `/`).
pub fn expand(arg: &str) -> Result<Expanded, RemoteError> {
    let named = parse(arg).map_err(|reason| RemoteError {
        url: arg.chars().take(200).collect(),
        reason,
        missing: false,
    })?;
    let fail = |reason: String| RemoteError {
        url: named.shown.clone(),
        reason,
        missing: false,
    };
    let store = store_for(&named.base).map_err(&fail)?;
    let object = |meta: &ObjectMeta| RemoteObject {
        store: Arc::clone(&store),
        location: meta.location.clone(),
        size: meta.size,
        url: format!("{}{}", shown_base(&named), meta.location),
    };
    let web = matches!(named.base.scheme(), "http" | "https");
    if let Some(at) = named.key.find(['*', '?', '[']) {
        if web {
            return Err(fail(
                "an http(s) server cannot be listed, so its URLs take no glob; name each object"
                    .into(),
            ));
        }
        let pattern =
            glob::Pattern::new(&named.key).map_err(|e| fail(format!("bad glob pattern: {e}")))?;
        let prefix = folder_of(&named.key[..at]);
        let options = glob::MatchOptions {
            require_literal_separator: true,
            ..Default::default()
        };
        let listed = list(&store, prefix).map_err(|e| fail(explain(&e)))?;
        let objects = listed
            .iter()
            .filter(|m| pattern.matches_with(m.location.as_ref(), options))
            .map(object)
            .collect();
        return Ok(Expanded {
            objects,
            skipped: Vec::new(),
        });
    }
    if !named.key.is_empty() && !named.key.ends_with('/') {
        let location = ObjectPath::from(named.key.as_str());
        let (store_, location_) = (Arc::clone(&store), location);
        match block(async move { store_.head(&location_).await }) {
            Ok(meta) => {
                return Ok(Expanded {
                    objects: vec![object(&meta)],
                    skipped: Vec::new(),
                });
            }
            // Not an object: perhaps a prefix written without its slash.
            Err(object_store::Error::NotFound { .. }) if !web => {}
            Err(e) => return Err(fail(explain(&e))),
        }
    }
    if web {
        return Err(fail(
            "an http(s) server cannot be listed; name each object by its URL".into(),
        ));
    }
    let prefix = if named.key.is_empty() || named.key.ends_with('/') {
        named.key.clone()
    } else {
        format!("{}/", named.key)
    };
    let listed = list(&store, &prefix).map_err(|e| fail(explain(&e)))?;
    if listed.is_empty() {
        return Err(RemoteError {
            missing: true,
            ..fail(
                "no such object, and no object below it as a prefix; check the bucket and key"
                    .into(),
            )
        });
    }
    let mut out = Expanded {
        objects: Vec::new(),
        skipped: Vec::new(),
    };
    for meta in &listed {
        let obj = object(meta);
        match log_object(&obj) {
            Ok(()) => out.objects.push(obj),
            Err(reason) => out.skipped.push(Skipped {
                path: obj.url.clone(),
                reason,
            }),
        }
    }
    Ok(out)
}

/// A key up to and with its last `/` (empty for a key at the top).
fn folder_of(key: &str) -> &str {
    &key[..key.rfind('/').map_or(0, |s| s + 1)]
}

/// The shown URL up to the key: `s3://bucket/`.
fn shown_base(named: &Named) -> String {
    let shown = &named.shown;
    let key_at = shown.len() - named.key.len();
    shown[..key_at].to_string()
}

/// Every object below `prefix`, sorted by key, hidden ones (a key part
/// starting with `.`: scratch files, markers) left out as in a local walk.
fn list(
    store: &Arc<dyn ObjectStore>,
    prefix: &str,
) -> Result<Vec<ObjectMeta>, object_store::Error> {
    let store = Arc::clone(store);
    let prefix = prefix.trim_end_matches('/').to_string();
    let mut listed = block(async move {
        let prefix = (!prefix.is_empty()).then(|| ObjectPath::from(prefix.as_str()));
        let mut stream = store.list(prefix.as_ref());
        let mut all = Vec::new();
        while let Some(meta) = stream.next().await {
            all.push(meta?);
        }
        Ok::<_, object_store::Error>(all)
    })?;
    listed.retain(|m| !m.location.parts().any(|p| p.as_ref().starts_with('.')));
    listed.sort_by(|a, b| a.location.cmp(&b.location));
    Ok(listed)
}

/// Whether a listed object is a log: by its name, else by its content, as
/// for files in a local directory.
fn log_object(obj: &RemoteObject) -> Result<(), String> {
    let name = obj.location.filename().unwrap_or_default().to_lowercase();
    if crate::log_format::named_like_a_log(&name) {
        return Ok(());
    }
    let head = obj
        .read_range(0, obj.size.min(4096))
        .map_err(|e| e.to_string())?;
    if sniff(&head) != LogFormat::Ndjson || crate::log_format::opens_a_json_object(&head) {
        Ok(())
    } else {
        Err(crate::log_format::not_a_log_reason())
    }
}

impl RemoteObject {
    /// Bytes `start..start + len` (fewer at the end), retried by the store.
    pub fn read_range(&self, start: u64, len: u64) -> std::io::Result<bytes::Bytes> {
        let end = (start + len).min(self.size);
        if start >= end {
            return Ok(bytes::Bytes::new());
        }
        let (store, location) = (Arc::clone(&self.store), self.location.clone());
        block(async move { store.get_range(&location, start..end).await })
            .map_err(|e| self.io_error(start, &e))
    }

    fn io_error(&self, offset: u64, e: &object_store::Error) -> std::io::Error {
        std::io::Error::other(format!(
            "reading {} at byte {offset} failed: {}",
            self.url,
            explain(e)
        ))
    }

    /// The object named `name` beside this one (under the same prefix), up
    /// to `limit` bytes: None when there is none, an error past the limit.
    pub fn sibling(&self, name: &str, limit: u64) -> std::io::Result<Option<bytes::Bytes>> {
        let mut parts: Vec<_> = self.location.parts().collect();
        parts.pop();
        parts.push(name.into());
        let location = ObjectPath::from_iter(parts);
        let url = match self.url.rsplit_once('/') {
            Some((prefix, _)) => format!("{prefix}/{name}"),
            None => name.to_string(),
        };
        let store = Arc::clone(&self.store);
        let failed = |e: &object_store::Error| {
            std::io::Error::other(format!("reading {url} failed: {}", explain(e)))
        };
        let head = {
            let (store, location) = (Arc::clone(&store), location.clone());
            block(async move { store.head(&location).await })
        };
        let size = match head {
            Ok(meta) => meta.size,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(failed(&e)),
        };
        if size > limit {
            return Err(std::io::Error::other(format!(
                "{url} holds {size} bytes, more than the {limit} it may"
            )));
        }
        if size == 0 {
            return Ok(Some(bytes::Bytes::new()));
        }
        block(async move { store.get_range(&location, 0..size).await })
            .map(Some)
            .map_err(|e| failed(&e))
    }

    /// The format by the object's first bytes.
    pub fn format(&self) -> std::io::Result<LogFormat> {
        Ok(sniff(&self.read_range(0, 4)?))
    }

    /// A reader of the whole object from `start`, a few blocks read ahead.
    pub fn reader_from(&self, start: u64) -> ObjectReader {
        ObjectReader {
            object: self.clone(),
            pos: start,
            current: bytes::Bytes::new(),
            ahead: Default::default(),
        }
    }
}

/// Reads an object front to back in ranged reads of `BLOCK` bytes, the next
/// ones asked for while the current one is consumed.
pub struct ObjectReader {
    object: RemoteObject,
    /// Offset of the first byte not yet in `current` or asked for.
    pos: u64,
    current: bytes::Bytes,
    /// Reads asked for and not yet consumed, in order: (offset, read).
    ahead: std::collections::VecDeque<(u64, PendingRead)>,
}

type PendingRead = tokio::task::JoinHandle<object_store::Result<bytes::Bytes>>;

impl ObjectReader {
    /// Keep `READS_AHEAD` reads in flight (fewer near the end).
    fn ask(&mut self) {
        while self.ahead.len() < READS_AHEAD && self.pos < self.object.size {
            let end = (self.pos + BLOCK).min(self.object.size);
            let (store, location) = (Arc::clone(&self.object.store), self.object.location.clone());
            let range = self.pos..end;
            let read = io_runtime().spawn(async move { store.get_range(&location, range).await });
            self.ahead.push_back((self.pos, read));
            self.pos = end;
        }
    }
}

/// Ranged reads in flight per object: a store answers each at its own
/// pace, so several at once keep the parser fed (memory: this many blocks).
const READS_AHEAD: usize = 4;

impl Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.current.is_empty() {
            self.ask();
            let Some((offset, read)) = self.ahead.pop_front() else {
                return Ok(0);
            };
            let got = match wait(read) {
                Ok(r) => r,
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            };
            self.current = got.map_err(|e| self.object.io_error(offset, &e))?;
            self.ask();
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current = self.current.slice(n..);
        Ok(n)
    }
}

impl Drop for ObjectReader {
    /// A reader dropped before its end (an error, a stopped read) cancels
    /// the reads it had asked for.
    fn drop(&mut self) {
        for (_, read) in &self.ahead {
            read.abort();
        }
    }
}

impl Length for RemoteObject {
    fn len(&self) -> u64 {
        self.size
    }
}

/// Parts of an object fetched up front: the column chunks of the row groups
/// a Parquet reader decodes. The Parquet crate's reader asks for each
/// page's header through `get_read` and then its data; a request each (of
/// a whole read block) made a 137 MB file from a local S3 server take over
/// a quarter of an hour, where the chunks in a few ranged reads take
/// seconds.
pub struct Fetched {
    object: RemoteObject,
    /// (offset, bytes), sorted by offset, not overlapping.
    parts: Vec<(u64, bytes::Bytes)>,
}

/// Ranges this close together are fetched as one read.
const COALESCE: u64 = 1 << 20;

impl RemoteObject {
    /// `ranges` of the object, read now (together where they are close,
    /// several at once) and kept for a Parquet reader.
    pub fn fetch(&self, ranges: &[std::ops::Range<u64>]) -> std::io::Result<Fetched> {
        let mut sorted: Vec<std::ops::Range<u64>> = ranges
            .iter()
            .map(|r| r.start.min(self.size)..r.end.min(self.size))
            .filter(|r| r.start < r.end)
            .collect();
        sorted.sort_by_key(|r| r.start);
        let mut merged: Vec<std::ops::Range<u64>> = Vec::new();
        for r in sorted {
            match merged.last_mut() {
                Some(last) if r.start <= last.end + COALESCE => last.end = last.end.max(r.end),
                _ => merged.push(r),
            }
        }
        let (store, location) = (Arc::clone(&self.store), self.location.clone());
        let asked = merged.clone();
        let got = block(async move { store.get_ranges(&location, &asked).await })
            .map_err(|e| self.io_error(merged.first().map_or(0, |r| r.start), &e))?;
        Ok(Fetched {
            object: self.clone(),
            parts: merged.iter().map(|r| r.start).zip(got).collect(),
        })
    }
}

impl Fetched {
    /// The fetched bytes from `start` on, when at least `len` of them were
    /// fetched.
    fn from(&self, start: u64, len: u64) -> Option<bytes::Bytes> {
        let at = self.parts.partition_point(|(offset, _)| *offset <= start);
        let (offset, bytes) = self.parts.get(at.checked_sub(1)?)?;
        let skip = usize::try_from(start - offset).ok()?;
        (skip as u64 + len <= bytes.len() as u64).then(|| bytes.slice(skip..))
    }
}

impl Length for Fetched {
    fn len(&self) -> u64 {
        self.object.size
    }
}

/// Reads within the fetched parts; anything else (not asked for by the
/// readers here) is read from the object.
impl ChunkReader for Fetched {
    type T = bytes::buf::Reader<bytes::Bytes>;

    fn get_read(&self, start: u64) -> datafusion::parquet::errors::Result<Self::T> {
        use bytes::Buf;
        match self.from(start, 1) {
            Some(bytes) => Ok(bytes.reader()),
            None => Ok(self.get_bytes(start, BLOCK as usize)?.reader()),
        }
    }

    fn get_bytes(
        &self,
        start: u64,
        length: usize,
    ) -> datafusion::parquet::errors::Result<bytes::Bytes> {
        match self.from(start, length as u64) {
            Some(bytes) => Ok(bytes.slice(..length)),
            None => self.object.get_bytes(start, length),
        }
    }
}

/// Parquet reads: the footer and each column chunk by its own range.
impl ChunkReader for RemoteObject {
    type T = ObjectReader;

    fn get_read(&self, start: u64) -> datafusion::parquet::errors::Result<ObjectReader> {
        Ok(self.reader_from(start))
    }

    fn get_bytes(
        &self,
        start: u64,
        length: usize,
    ) -> datafusion::parquet::errors::Result<bytes::Bytes> {
        self.read_range(start, length as u64)
            .map_err(|e| datafusion::parquet::errors::ParquetError::External(Box::new(e)))
    }
}

/// An object being written: a multipart upload whose parts go up as they
/// fill, and which becomes visible only when [`ObjectWriter::finish`]
/// completes it. Dropped unfinished (an error, an interrupt), the upload is
/// aborted and no object appears.
pub struct ObjectWriter {
    upload: Option<object_store::WriteMultipart>,
    url: String,
}

/// Parts uploaded at once per object.
const PARTS_IN_FLIGHT: usize = 4;

impl ObjectWriter {
    /// Start writing the object at `url` (a key, not a prefix).
    pub fn create(url: &str) -> std::io::Result<ObjectWriter> {
        let named = parse(url).map_err(std::io::Error::other)?;
        let store = store_for(&named.base).map_err(std::io::Error::other)?;
        ObjectWriter::create_with(store, &named.key, &named.shown)
    }

    /// Start writing `key` in `store`, shown as `url`.
    pub fn create_with(
        store: Arc<dyn ObjectStore>,
        key: &str,
        url: &str,
    ) -> std::io::Result<ObjectWriter> {
        let location = ObjectPath::from(key);
        let upload = block(async move { store.put_multipart(&location).await })
            .map_err(|e| std::io::Error::other(format!("{url}: {}", explain(&e))))?;
        Ok(ObjectWriter {
            upload: Some(object_store::WriteMultipart::new(upload)),
            url: url.to_string(),
        })
    }

    fn upload(&mut self) -> std::io::Result<&mut object_store::WriteMultipart> {
        self.upload
            .as_mut()
            .ok_or_else(|| std::io::Error::other("the upload is finished"))
    }

    /// Complete the upload: the object appears, whole.
    pub fn finish(mut self) -> std::io::Result<()> {
        let upload = self.upload.take().expect("finished once");
        let _in_runtime = io_runtime().enter();
        wait(upload.finish())
            .map(|_| ())
            .map_err(|e| std::io::Error::other(format!("{}: {}", self.url, explain(&e))))
    }
}

impl std::io::Write for ObjectWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let url = self.url.clone();
        let _in_runtime = io_runtime().enter();
        let upload = self.upload()?;
        // Bounded memory: wait while too many parts are in flight.
        wait(upload.wait_for_capacity(PARTS_IN_FLIGHT))
            .map_err(|e| std::io::Error::other(format!("{url}: {}", explain(&e))))?;
        upload.write(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for ObjectWriter {
    fn drop(&mut self) {
        if let Some(upload) = self.upload.take() {
            let _in_runtime = io_runtime().enter();
            // A failed abort leaves only invisible parts, which the store's
            // lifecycle rule for incomplete uploads reclaims.
            let _ = wait(upload.abort());
        }
    }
}

/// A hidden prefix in a store that a cluster audit writes its views under
/// (`.hvaudit-PID-TIME.tmp/`: listings of the inputs pass it over), with
/// every object below it deleted when dropped.
pub struct TempPrefix {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    url: String,
    /// The same removal, registered for an interrupt.
    on_interrupt: u64,
}

impl TempPrefix {
    /// A new prefix beside the object or below the prefix `near`.
    pub fn near(near: &str) -> Result<TempPrefix, String> {
        let named = parse(near)?;
        if matches!(named.base.scheme(), "http" | "https") {
            return Err("an http(s) server cannot hold the views; pass --spill-dir".into());
        }
        let store = store_for(&named.base)?;
        // The folder of the object or of the pattern's first wildcard, or
        // the prefix itself (ending in `/`).
        let literal = named.key.split(['*', '?', '[']).next().unwrap_or_default();
        let dir = folder_of(literal);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let key = format!("{dir}.hvaudit-{}-{nanos}.tmp", std::process::id());
        let url = format!("{}{key}/", shown_base(&named));
        let prefix = ObjectPath::from(key.as_str());
        let on_interrupt = {
            let (store, prefix, url) = (Arc::clone(&store), prefix.clone(), url.clone());
            crate::signals::on_interrupt(Box::new(move || remove_below(&store, &prefix, &url)))
        };
        Ok(TempPrefix {
            url,
            prefix,
            store,
            on_interrupt,
        })
    }

    /// Its URL, ending in `/`.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for TempPrefix {
    fn drop(&mut self) {
        crate::signals::forget_cleanup(self.on_interrupt);
        remove_below(&self.store, &self.prefix, &self.url);
    }
}

/// Delete every object below `prefix`; a failure is said, not fatal.
fn remove_below(store: &Arc<dyn ObjectStore>, prefix: &ObjectPath, url: &str) {
    let (store, prefix) = (Arc::clone(store), prefix.clone());
    let removed = block(async move {
        let mut listed = store.list(Some(&prefix));
        while let Some(meta) = listed.next().await {
            store.delete(&meta?.location).await?;
        }
        Ok::<_, object_store::Error>(())
    });
    if let Err(e) = removed {
        eprintln!(
            "hvaudit: could not remove the views under {url}: {}; delete them by hand",
            explain(&e)
        );
    }
}

/// The runtime object-store requests run on, whatever thread asks: the
/// ingest's reader threads are plain threads, and commands may already be
/// inside another runtime.
fn io_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("hvaudit-io")
            .enable_all()
            .build()
            .expect("a Tokio runtime for object-store reads")
    })
}

/// Block this thread until `future` is done. Outside Tokio's budget: a
/// thread inside a runtime (an audit's queries) that has spent its budget
/// would get `Pending` from every Tokio future, with an immediate wake-up,
/// and spin forever, since the runtime never gets to renew the budget.
fn wait<F: std::future::Future>(future: F) -> F::Output {
    futures::executor::block_on(tokio::task::unconstrained(future))
}

/// Run `work` on the I/O runtime and wait for it from any thread.
pub fn block<F>(work: F) -> F::Output
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    match wait(io_runtime().spawn(work)) {
        Ok(out) => out,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// Options that apply to every store made from then on.
#[derive(Debug, Default, Clone)]
pub struct StoreOptions {
    /// `--endpoint`: an S3-compatible store's URL (else `AWS_ENDPOINT_URL`).
    pub endpoint: Option<String>,
}

fn options() -> &'static Mutex<StoreOptions> {
    static OPTIONS: OnceLock<Mutex<StoreOptions>> = OnceLock::new();
    OPTIONS.get_or_init(Mutex::default)
}

/// Set the options stores are made with (before the first is made).
pub fn configure(opts: StoreOptions) {
    if let Ok(mut o) = options().lock() {
        *o = opts;
    }
}

fn stores() -> &'static Mutex<HashMap<String, Arc<dyn ObjectStore>>> {
    static STORES: OnceLock<Mutex<HashMap<String, Arc<dyn ObjectStore>>>> = OnceLock::new();
    STORES.get_or_init(Mutex::default)
}

/// The store for a URL's bucket or host, made once per run.
pub fn store_for(url: &Url) -> Result<Arc<dyn ObjectStore>, String> {
    let key = format!(
        "{}://{}@{}:{}",
        url.scheme(),
        url.username(),
        url.host_str().unwrap_or_default(),
        url.port_or_known_default().unwrap_or_default()
    );
    let mut stores = stores()
        .lock()
        .map_err(|_| "store table poisoned".to_string())?;
    if let Some(s) = stores.get(&key) {
        return Ok(Arc::clone(s));
    }
    let store = make_store(url)?;
    stores.insert(key, Arc::clone(&store));
    Ok(store)
}

/// Retries: object_store's backoff, bounded to a minute so that an
/// endpoint that is down fails the run in reasonable time.
fn retry() -> RetryConfig {
    RetryConfig {
        max_retries: 5,
        retry_timeout: std::time::Duration::from_secs(60),
        ..Default::default()
    }
}

fn make_store(url: &Url) -> Result<Arc<dyn ObjectStore>, String> {
    use object_store::{ClientOptions, aws, azure, gcp, http};
    let base = format!(
        "{}://{}",
        url.scheme(),
        &url[url::Position::BeforeUsername..url::Position::AfterPort]
    );
    let built: object_store::Result<Arc<dyn ObjectStore>> = match url.scheme() {
        "s3" | "s3a" => {
            let mut b = aws::AmazonS3Builder::from_env()
                .with_url(base)
                .with_retry(retry());
            if let Some(endpoint) = options().lock().ok().and_then(|o| o.endpoint.clone()) {
                b = b.with_endpoint(endpoint);
            }
            b = aws_profile::apply(b)?;
            b.build().map(|s| Arc::new(s) as _)
        }
        "gs" => gcp::GoogleCloudStorageBuilder::from_env()
            .with_url(base)
            .with_retry(retry())
            .build()
            .map(|s| Arc::new(s) as _),
        "az" | "azure" | "abfs" | "abfss" => azure::MicrosoftAzureBuilder::from_env()
            .with_url(base)
            .with_retry(retry())
            .build()
            .map(|s| Arc::new(s) as _),
        "http" | "https" => http::HttpBuilder::new()
            .with_url(base)
            .with_retry(retry())
            .with_client_options(ClientOptions::new().with_allow_http(url.scheme() == "http"))
            .build()
            .map(|s| Arc::new(s) as _),
        other => return Err(format!("unsupported URL scheme {other}://")),
    };
    built.map_err(|e| explain(&e))
}

/// An object-store error in words that say what to do, without secrets.
pub fn explain(e: &object_store::Error) -> String {
    use object_store::Error as E;
    let text = redact(&e.to_string());
    let lower = text.to_lowercase();
    match e {
        // A listing's 404 comes as a generic error with S3's code in it.
        _ if lower.contains("nosuchbucket") => {
            "the bucket does not exist; check its name (and the endpoint or region)".into()
        }
        E::NotFound { .. } => "no such object; check the key".into(),
        E::PermissionDenied { .. } => format!(
            "access denied; the credentials in use may not read it ({})",
            CREDENTIALS_HINT
        ),
        E::Unauthenticated { .. } => format!(
            "the credentials were refused; check them ({})",
            CREDENTIALS_HINT
        ),
        _ if lower.contains("invalidaccesskeyid") || lower.contains("signaturedoesnotmatch") => {
            format!("the credentials were refused; check them ({CREDENTIALS_HINT})")
        }
        _ if lower.contains("accessdenied") || lower.contains("403 forbidden") => {
            format!("access denied; the credentials in use may not read it ({CREDENTIALS_HINT})")
        }
        _ if lower.contains("credential") || lower.contains("metadata") => {
            format!("no usable credentials found ({CREDENTIALS_HINT}); {text}")
        }
        _ if lower.contains("url scheme is not allowed") || lower.contains("http scheme") => {
            format!("{text}; set AWS_ALLOW_HTTP=true to reach a plain-http endpoint")
        }
        _ if lower.contains("error sending request")
            || lower.contains("connect")
            || lower.contains("dns") =>
        {
            format!(
                "cannot reach the endpoint: {text}; check --endpoint (or AWS_ENDPOINT_URL) and \
                 that the store is up"
            )
        }
        _ => text,
    }
}

const CREDENTIALS_HINT: &str = "S3: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE or an \
     instance role; GCS: GOOGLE_APPLICATION_CREDENTIALS; Azure: AZURE_STORAGE_ACCOUNT_NAME with \
     AZURE_STORAGE_ACCOUNT_KEY or a SAS token";

/// `text` with the query of every URL in it cut (signatures, SAS tokens)
/// and user info dropped.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let end = after
            .find(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == ')' || c == '>')
            .unwrap_or(after.len());
        let url = &after[..end];
        let url = url.split(['?', '#']).next().unwrap_or_default();
        let url = match url.split_once('/') {
            Some((authority, path)) => format!(
                "{}/{}",
                authority.rsplit_once('@').map_or(authority, |(_, h)| h),
                path
            ),
            None => url.rsplit_once('@').map_or(url, |(_, h)| h).to_string(),
        };
        out.push_str(&url);
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The AWS profile files (`~/.aws/credentials`, `~/.aws/config`, or
/// `AWS_SHARED_CREDENTIALS_FILE` / `AWS_CONFIG_FILE`), profile `AWS_PROFILE`
/// or `default`: used when the environment holds no keys, as the AWS tools
/// do (the store builder reads only the environment and instance roles).
mod aws_profile {
    use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};

    pub fn apply(mut b: AmazonS3Builder) -> Result<AmazonS3Builder, String> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let keys_in_env = env("AWS_ACCESS_KEY_ID").is_some()
            || env("AWS_WEB_IDENTITY_TOKEN_FILE").is_some()
            || env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").is_some()
            || env("AWS_CONTAINER_CREDENTIALS_FULL_URI").is_some();
        let home = env("HOME").map(std::path::PathBuf::from);
        let credentials = env("AWS_SHARED_CREDENTIALS_FILE")
            .map(Into::into)
            .or_else(|| home.as_ref().map(|h| h.join(".aws/credentials")));
        let config = env("AWS_CONFIG_FILE")
            .map(Into::into)
            .or_else(|| home.as_ref().map(|h| h.join(".aws/config")));
        let profile = env("AWS_PROFILE").unwrap_or_else(|| "default".into());
        let section = |path: &Option<std::path::PathBuf>, name: &str| {
            let path = path.as_ref()?;
            let ini = ini::Ini::load_from_file(path).ok()?;
            ini.section(Some(name)).cloned()
        };
        let from_config = section(
            &config,
            &if profile == "default" {
                profile.clone()
            } else {
                format!("profile {profile}")
            },
        );
        let from_credentials = section(&credentials, &profile);
        let named_but_missing =
            env("AWS_PROFILE").is_some() && from_config.is_none() && from_credentials.is_none();
        if named_but_missing {
            return Err(format!(
                "AWS_PROFILE names the profile {profile:?}, which neither the credentials nor the \
                 config file holds; check AWS_PROFILE"
            ));
        }
        let get = |key: &str| {
            from_credentials
                .as_ref()
                .and_then(|s| s.get(key))
                .or_else(|| from_config.as_ref().and_then(|s| s.get(key)))
                .map(str::to_string)
        };
        if !keys_in_env
            && let (Some(id), Some(secret)) =
                (get("aws_access_key_id"), get("aws_secret_access_key"))
        {
            b = b.with_access_key_id(id).with_secret_access_key(secret);
            if let Some(token) = get("aws_session_token") {
                b = b.with_token(token);
            }
        }
        if env("AWS_REGION").is_none()
            && env("AWS_DEFAULT_REGION").is_none()
            && let Some(region) = get("region")
        {
            b = b.with_region(region);
        }
        if b.get_config_value(&AmazonS3ConfigKey::Endpoint).is_none()
            && let Some(endpoint) = get("endpoint_url")
        {
            b = b.with_endpoint(endpoint);
        }
        let metadata_off = env("AWS_EC2_METADATA_DISABLED").is_some_and(|v| v == "true");
        let no_keys = b
            .get_config_value(&AmazonS3ConfigKey::AccessKeyId)
            .is_none()
            && !keys_in_env
            && b.get_config_value(&AmazonS3ConfigKey::SkipSignature)
                .is_none_or(|v| v != "true");
        if no_keys && metadata_off {
            return Err(format!(
                "no credentials found: the environment and the profile files hold none and \
                 AWS_EC2_METADATA_DISABLED forbids asking the instance ({}; or \
                 AWS_SKIP_SIGNATURE=true for a public bucket)",
                super::CREDENTIALS_HINT
            ));
        }
        Ok(b)
    }
}

/// DataFusion's object-store registry with every URL scheme above made on
/// demand from the environment, for `--in-place` scans, and for the
/// scheduler and executors of a cluster reading the same URLs.
#[derive(Debug, Default)]
pub struct UrlStores {
    made: DefaultObjectStoreRegistry,
}

impl ObjectStoreRegistry for UrlStores {
    fn register_store(
        &self,
        url: &Url,
        store: Arc<dyn ObjectStore>,
    ) -> Option<Arc<dyn ObjectStore>> {
        self.made.register_store(url, store)
    }

    fn get_store(&self, url: &Url) -> datafusion::error::Result<Arc<dyn ObjectStore>> {
        match self.made.get_store(url) {
            Ok(store) => Ok(store),
            Err(_) if SCHEMES.contains(&url.scheme()) => {
                let store = store_for(url).map_err(|reason| {
                    datafusion::error::DataFusionError::Execution(format!(
                        "{}: {reason}",
                        redact(url.as_str())
                    ))
                })?;
                self.made.register_store(url, Arc::clone(&store));
                Ok(store)
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_paths() {
        for url in [
            "s3://b/k",
            "S3://b/",
            "gs://b/x",
            "az://c/x",
            "abfss://c@a.dfs/x",
            "https://h/x",
        ] {
            assert!(is_url(url), "{url}");
        }
        for path in ["logs/", "-", "file.ndjson", "ftp://h/x", "s3:/b"] {
            assert!(!is_url(path), "{path}");
        }
    }

    #[test]
    fn shown_urls_carry_no_secrets() {
        assert_eq!(
            redact("GET https://user:pw@host:9/b/k?X-Amz-Signature=abc&sig=d failed"),
            "GET https://host:9/b/k failed"
        );
        assert_eq!(
            parse("s3://bucket/logs/a.ndjson").unwrap().shown,
            "s3://bucket/logs/a.ndjson"
        );
        assert_eq!(
            parse("https://u:p@host/a.ndjson").unwrap().shown,
            "https://host/a.ndjson"
        );
        assert!(parse("https://host/a.ndjson?sig=x").is_err());
        assert!(parse("s3:///key").is_err());
    }

    /// An audit's queries read object ranges from inside a runtime; past
    /// Tokio's per-task budget (128 polls) each wait used to spin forever.
    #[test]
    fn reads_from_inside_a_runtime_go_on_past_its_budget() {
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let (s, location) = (Arc::clone(&store), ObjectPath::from("log.ndjson"));
        block(async move { s.put(&location, b"{}\n{}\n".to_vec().into()).await }).unwrap();
        let object = RemoteObject {
            store,
            location: ObjectPath::from("log.ndjson"),
            size: 6,
            url: "memory:///log.ndjson".into(),
        };
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            runtime.block_on(async {
                for _ in 0..1000 {
                    assert_eq!(&object.read_range(0, 3).unwrap()[..], b"{}\n");
                }
            });
            done.send(()).unwrap();
        });
        finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("1000 reads from inside a runtime finish");
    }

    #[test]
    fn a_glob_keeps_its_characters_in_the_key() {
        let named = parse("s3://b/logs/2026-07-?[0-9]*.ndjson.zst").unwrap();
        assert_eq!(named.key, "logs/2026-07-?[0-9]*.ndjson.zst");
        assert_eq!(shown_base(&named), "s3://b/");
    }
}
