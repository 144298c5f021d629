//! The proxy cache (`proxy_cache_path`, `proxy_cache`): generic over what fills it — a zone
//! maps a key to a stored response. `policy` decides (cacheability, validity, file names),
//! `index` keeps the zone's keys in order of use, `store` reads and writes the files; this
//! module is the shell: the zones of the process (kept across reloads while their name and
//! directory stay), lookups, the lock of a key being fetched, and the body that tees a
//! response into its file while it streams to the client.

pub mod index;
pub mod policy;
pub mod store;

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body::Frame;

use crate::conf::cache::CachePath;
use crate::http::body::BoxBody;
use index::{Hash, Index};

/// Unix seconds now.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// One `proxy_cache_path` zone at run time.
pub struct Zone {
    /// Its settings.
    pub conf: Arc<CachePath>,
    index: Mutex<Index>,
    /// Keys being fetched now (`proxy_cache_lock`, `updating`), with when it began.
    fetching: Mutex<HashMap<Hash, (std::time::Instant, Arc<tokio::sync::Notify>)>>,
}

type Registry = Mutex<HashMap<(String, PathBuf), Arc<Zone>>>;

fn registry() -> &'static Registry {
    static R: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
    R.get_or_init(Default::default)
}

/// The zone of `conf`: the process keeps one per name and directory, so a reload that keeps
/// its settings keeps its index; other settings start a new index.
pub fn zone(conf: &Arc<CachePath>) -> Arc<Zone> {
    let mut r = registry().lock().unwrap_or_else(|e| e.into_inner());
    let k = (conf.name.clone(), conf.path.clone());
    if let Some(z) = r.get(&k) {
        if *z.conf == *conf.as_ref() {
            return z.clone();
        }
    }
    let z = Arc::new(Zone {
        conf: conf.clone(),
        index: Mutex::new(Index::new(
            conf.max_size,
            conf.max_entries(),
            conf.inactive.as_secs(),
        )),
        fetching: Mutex::new(HashMap::new()),
    });
    r.insert(k, z.clone());
    z
}

static REFRESHING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Background refreshes running now (`proxy_cache_background_update`): a graceful stop
/// waits for them as for requests.
pub fn refreshing() -> usize {
    REFRESHING.load(std::sync::atomic::Ordering::Acquire)
}

/// One background refresh running, counted in [`refreshing`] while it lives.
pub struct Refreshing(());

impl Refreshing {
    /// Counts one more.
    pub fn start() -> Self {
        REFRESHING.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Refreshing(())
    }
}

impl Drop for Refreshing {
    fn drop(&mut self) {
        REFRESHING.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// What a lookup found.
pub enum Found {
    /// Nothing stored.
    Miss,
    /// A stored response, fresh or not (`head.valid`).
    Entry(File, store::Head),
}

impl Zone {
    fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The file of a hash.
    pub fn path(&self, hash: &Hash) -> PathBuf {
        self.conf
            .path
            .join(policy::rel_path(hash, &self.conf.levels))
    }

    fn remove_files(&self, gone: Vec<Hash>) {
        for h in gone {
            let _ = std::fs::remove_file(self.path(&h));
        }
    }

    /// A request for `key` (hash `hash`): counts the use and returns it with what is stored.
    pub fn lookup(&self, hash: &Hash, key: &[u8]) -> (u32, Found) {
        let now = now();
        let (uses, gone) = self.index().used(hash, now);
        self.remove_files(gone);
        let path = self.path(hash);
        match store::open(&path, key) {
            Some((f, head)) => {
                // Found on disk after a restart: counted from now on.
                if self.index().size(hash).is_none() {
                    let size = head.body_at + head.body_len;
                    let gone = self.index().stored(hash, size, now);
                    self.remove_files(gone);
                }
                (uses, Found::Entry(f, head))
            }
            None => {
                if self.index().size(hash).is_some() {
                    self.index().remove(hash);
                }
                (uses, Found::Miss)
            }
        }
    }

    /// Marks `hash` as being fetched; Err when another request fetches it (with since when,
    /// and the notification its end gives). `age`: a fetch older than this is taken over
    /// (`proxy_cache_lock_age`: one more request goes, and is now the one waited for).
    pub fn begin_fetch(
        self: &Arc<Self>,
        hash: &Hash,
        age: Option<std::time::Duration>,
    ) -> Result<FetchGuard, (std::time::Instant, Arc<tokio::sync::Notify>)> {
        let mut f = self.fetching.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        if let Some((since, n)) = f.get_mut(hash) {
            match age {
                Some(a) if now.saturating_duration_since(*since) >= a => {}
                _ => return Err((*since, n.clone())),
            }
        }
        let n = Arc::new(tokio::sync::Notify::new());
        f.insert(*hash, (now, n.clone()));
        Ok(FetchGuard {
            zone: self.clone(),
            hash: *hash,
            notify: n,
        })
    }

    /// Whether another request fetches `hash` now.
    pub fn is_fetching(&self, hash: &Hash) -> bool {
        self.fetching
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(hash)
    }

    /// A response of `size` bytes was stored whole (outside a [`Tee`]).
    pub fn clone_stored(&self, hash: &Hash, size: u64) {
        self.stored(hash, size);
    }

    /// A response was stored.
    fn stored(&self, hash: &Hash, size: u64) {
        let gone = self.index().stored(hash, size, now());
        self.remove_files(gone);
    }
}

/// A key being fetched: others wait on it (`proxy_cache_lock`) until it is dropped.
pub struct FetchGuard {
    zone: Arc<Zone>,
    hash: Hash,
    /// Its entry's notification (another one's after a takeover).
    notify: Arc<tokio::sync::Notify>,
}

impl Drop for FetchGuard {
    fn drop(&mut self) {
        let mut f = self.zone.fetching.lock().unwrap_or_else(|e| e.into_inner());
        if f.get(&self.hash)
            .is_some_and(|(_, n)| Arc::ptr_eq(n, &self.notify))
        {
            f.remove(&self.hash);
        }
        self.notify.notify_waiters();
    }
}

/// A response body written to its cache file as it streams; the file is renamed in place
/// only when the body ended complete.
pub struct Tee {
    inner: BoxBody,
    writer: Option<store::Writer>,
    zone: Arc<Zone>,
    hash: Hash,
    _guard: Option<FetchGuard>,
}

impl Tee {
    /// Tees `inner` into `writer`.
    pub fn new(
        inner: BoxBody,
        writer: store::Writer,
        zone: Arc<Zone>,
        hash: Hash,
        guard: Option<FetchGuard>,
    ) -> Self {
        Tee {
            inner,
            writer: Some(writer),
            zone,
            hash,
            _guard: guard,
        }
    }

    fn commit(&mut self) {
        if let Some(w) = self.writer.take() {
            if let Some(size) = w.commit() {
                self.zone.stored(&self.hash, size);
            }
        }
        self._guard = None;
    }
}

impl http_body::Body for Tee {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(w)) = (frame.data_ref(), this.writer.as_mut()) {
                    if !w.write(data) {
                        this.writer = None;
                    }
                }
                if this.inner.is_end_stream() {
                    this.commit();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(None) => {
                this.commit();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                this.writer = None;
                this._guard = None;
                Poll::Ready(Some(Err(e)))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The bytes `start..=end` of a body; what follows them is still read (the whole goes to
/// the cache file) and dropped: the last part is held until the body ended, so the client's
/// complete answer is never the end of the reading.
pub struct Slice<B> {
    inner: B,
    last: Option<Bytes>,
    pos: u64,
    start: u64,
    end: u64,
}

impl<B> Slice<B> {
    /// Bytes `start..=end` of `inner`.
    pub fn new(inner: B, start: u64, end: u64) -> Self {
        Slice {
            inner,
            last: None,
            pos: 0,
            start,
            end,
        }
    }
}

impl<B> http_body::Body for Slice<B>
where
    B: http_body::Body<Data = Bytes, Error = std::io::Error> + Unpin,
{
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = &mut *self;
        loop {
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    let from = this.pos;
                    this.pos += data.len() as u64;
                    let lo = this.start.max(from);
                    let hi = (this.end + 1).min(this.pos);
                    if lo < hi {
                        let part = data.slice((lo - from) as usize..(hi - from) as usize);
                        if hi == this.end + 1 {
                            this.last = Some(part);
                            continue;
                        }
                        return Poll::Ready(Some(Ok(Frame::data(part))));
                    }
                }
                Poll::Ready(None) => {
                    return Poll::Ready(this.last.take().map(|b| Ok(Frame::data(b))));
                }
                other => return other,
            }
        }
    }
}
