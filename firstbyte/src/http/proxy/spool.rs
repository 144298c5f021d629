//! Bytes held between two sides that run at different speeds: memory first, then an unlinked
//! temp file, first in first out.
//!
//! [`Spool`] is the plain structure (no task, no clock): `proxy_buffering on` keeps a response
//! in one (`proxy_buffers` + `proxy_buffer_size` in memory, up to `proxy_max_temp_file_size`
//! on disk). [`buffered`] runs the response side: a task reads the upstream as fast
//! as it sends while the spool has room (so the upstream connection is freed early, as nginx
//! does), and the client's body takes from the spool as the client reads.
//!
//! A temp file is created in the configured directory and unlinked at once (nginx unlinks its
//! proxy temp files likewise; a request body's, in `stored`, is named while the request lives): nothing is left behind, even if the process dies. The file is
//! truncated whenever the reader catches up, so disk use follows what is held, not what went
//! through.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::Frame;
use http_body_util::BodyExt;
use tokio::sync::Notify;

use super::upstream::UpstreamBody;
use crate::conf::model::ProxyBuffers;

/// Bytes read back from the temp file per frame: 64 KiB, as file bodies.
const READ_CHUNK: usize = 64 * 1024;

/// Temp files made by this process (names are unique per process, as nginx's counter).
static TEMP_FILES: AtomicU64 = AtomicU64::new(0);

/// FIFO bytes: memory up to `mem_max`, then a temp file up to `file_max` (0: no file).
pub struct Spool {
    mem: VecDeque<Bytes>,
    mem_len: usize,
    mem_max: usize,
    dir: PathBuf,
    file: Option<File>,
    file_max: u64,
    write_size: usize,
    /// The file holds `[rpos, wpos)`.
    rpos: u64,
    wpos: u64,
    /// The file could not be made: hold in memory only from now on.
    no_file: bool,
}

impl Spool {
    /// An empty spool; `write_size` bounds each write to the file.
    pub fn new(mem_max: usize, dir: PathBuf, file_max: u64, write_size: usize) -> Self {
        Self {
            mem: VecDeque::new(),
            mem_len: 0,
            mem_max,
            dir,
            file: None,
            file_max,
            write_size: write_size.max(1),
            rpos: 0,
            wpos: 0,
            no_file: false,
        }
    }

    /// A spool for `proxy_buffering on` with these settings.
    pub fn for_response(b: &ProxyBuffers) -> Self {
        Self::new(
            b.memory(),
            b.temp_path.clone(),
            b.max_temp_file_size,
            b.temp_file_write_size,
        )
    }

    /// Bytes held.
    pub fn len(&self) -> u64 {
        self.mem_len as u64 + (self.wpos - self.rpos)
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held in memory.
    pub fn in_memory(&self) -> usize {
        self.mem_len
    }

    fn file_usable(&self) -> bool {
        self.file_max > 0 && !self.no_file
    }

    /// Whether more may be pushed: memory has room (and nothing waits in the file, which
    /// holds newer bytes), or the file is under its limit. A push may overshoot by one frame.
    pub fn has_room(&self) -> bool {
        (self.rpos == self.wpos && self.mem_len < self.mem_max)
            || (self.file_usable() && self.wpos < self.file_max)
    }

    /// Appends `b`. Returns the temp file's path when this push created it (for the log).
    pub fn push(&mut self, mut b: Bytes) -> io::Result<Option<PathBuf>> {
        if self.rpos == self.wpos {
            let take = self.mem_max.saturating_sub(self.mem_len).min(b.len());
            if take > 0 {
                self.mem_len += take;
                self.mem.push_back(b.split_to(take));
            }
        }
        if b.is_empty() {
            return Ok(None);
        }
        let mut created = None;
        if self.file.is_none() && self.file_usable() {
            match temp_file(&self.dir) {
                Ok((f, path)) => {
                    self.file = Some(f);
                    created = Some(path);
                }
                Err(e) => {
                    crate::fblog!(
                        Crit,
                        "open() \"{}\" failed ({}): the response is held in memory",
                        self.dir.display(),
                        crate::log::OsError(&e)
                    );
                    self.no_file = true;
                }
            }
        }
        match &self.file {
            Some(f) if !self.no_file => {
                for piece in b.chunks(self.write_size) {
                    f.write_all_at(piece, self.wpos)?;
                    self.wpos += piece.len() as u64;
                }
            }
            // No file (0 or unusable): memory, past its size by this frame only, since the
            // caller stops reading until there is room again.
            _ => {
                self.mem_len += b.len();
                self.mem.push_back(b);
            }
        }
        Ok(created)
    }

    /// The oldest bytes held (at most `max` from the file), or None when empty.
    pub fn pop(&mut self, max: usize) -> io::Result<Option<Bytes>> {
        if let Some(b) = self.mem.pop_front() {
            self.mem_len -= b.len();
            return Ok(Some(b));
        }
        let Some(f) = &self.file else {
            return Ok(None);
        };
        if self.rpos == self.wpos {
            return Ok(None);
        }
        let n = usize::try_from(self.wpos - self.rpos)
            .unwrap_or(usize::MAX)
            .min(max.max(1));
        let mut buf = vec![0u8; n];
        f.read_exact_at(&mut buf, self.rpos)?;
        self.rpos += n as u64;
        if self.rpos == self.wpos {
            // Caught up: give the disk space back and start the file again.
            f.set_len(0)?;
            self.rpos = 0;
            self.wpos = 0;
        }
        Ok(Some(Bytes::from(buf)))
    }
}

/// A new temp file in `dir` (made if missing), already unlinked.
pub(super) fn temp_file(dir: &Path) -> io::Result<(File, PathBuf)> {
    let (f, path) = named_temp_file(dir)?;
    std::fs::remove_file(&path)?;
    Ok((f, path))
}

/// A new temp file in `dir` (made if missing), named: the caller removes it.
pub(super) fn named_temp_file(dir: &Path) -> io::Result<(File, PathBuf)> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if !dir.is_dir() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    loop {
        let n = TEMP_FILES.fetch_add(1, Ordering::Relaxed) + 1;
        let path = dir.join(format!("{:010}-{}", n, std::process::id()));
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(f) => return Ok((f, path)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// An upstream's response body a buffered response reads: HTTP ([`UpstreamBody`]) or
/// FastCGI.
pub trait Upstream:
    http_body::Body<Data = Bytes, Error = io::Error> + Unpin + Send + 'static
{
    /// Starts the read timeout again (after a pause that was the client's doing).
    fn rearm(&mut self);
}

impl<B: Upstream> Upstream for crate::http::rate::RateBody<B> {
    fn rearm(&mut self) {
        self.get_mut().rearm();
    }
}

impl<B: Upstream> Upstream for crate::http::rate::LaterRateBody<B> {
    fn rearm(&mut self) {
        self.get_mut().rearm();
    }
}

impl Upstream for UpstreamBody {
    fn rearm(&mut self) {
        UpstreamBody::rearm(self);
    }
}

/// What the reading task and the client's body share.
struct State {
    spool: Spool,
    /// The upstream's body ended: `Ok` at its end, `Err` when it failed.
    end: Option<Result<(), io::Error>>,
    /// The client's body waits for bytes.
    reader: Option<Waker>,
    /// The reading task waits for room.
    writer: Option<Waker>,
    /// The client's body is gone: the reading task stops (and drops the upstream).
    gone: bool,
}

fn lock(s: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// The client's side of a buffered response.
pub struct BufferedBody {
    state: Arc<Mutex<State>>,
    gone: Arc<Notify>,
}

/// Reads `body` on its own task into a spool made from `b`; `log_tail` ends the line logged
/// when the response spills to a temp file (nginx's `[warn] an upstream response is buffered
/// to a temporary file`).
pub fn buffered<B: Upstream>(mut body: B, b: &ProxyBuffers, log_tail: String) -> BufferedBody {
    let state = Arc::new(Mutex::new(State {
        spool: Spool::for_response(b),
        end: None,
        reader: None,
        writer: None,
        gone: false,
    }));
    let gone = Arc::new(Notify::new());
    let (st, g) = (state.clone(), gone.clone());
    tokio::spawn(async move {
        loop {
            let waited = std::future::poll_fn(|cx| {
                let mut s = lock(&st);
                if s.gone {
                    return Poll::Ready(None);
                }
                if s.spool.has_room() {
                    return Poll::Ready(Some(()));
                }
                s.writer = Some(cx.waker().clone());
                Poll::Pending
            });
            // Waiting for room is the client's pace, not the upstream's: the read timer
            // starts again after it.
            let full = !lock(&st).spool.has_room();
            if waited.await.is_none() {
                return;
            }
            if full {
                body.rearm();
            }
            let frame = tokio::select! {
                f = body.frame() => f,
                () = g.notified() => return,
            };
            let mut s = lock(&st);
            match frame {
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        match s.spool.push(data) {
                            Ok(Some(path)) => crate::fblog!(
                                Warn,
                                "an upstream response is buffered to a temporary file {} while reading upstream{log_tail}",
                                path.display()
                            ),
                            Ok(None) => {}
                            Err(e) => {
                                crate::fblog!(
                                    Crit,
                                    "write to a temporary file failed ({}) while reading upstream{log_tail}",
                                    crate::log::OsError(&e)
                                );
                                s.end = Some(Err(e));
                            }
                        }
                    }
                }
                Some(Err(e)) => s.end = Some(Err(e)),
                None => s.end = Some(Ok(())),
            }
            if let Some(w) = s.reader.take() {
                w.wake();
            }
            if s.end.is_some() {
                return;
            }
        }
    });
    BufferedBody { state, gone }
}

impl Drop for BufferedBody {
    fn drop(&mut self) {
        let mut s = lock(&self.state);
        s.gone = true;
        if let Some(w) = s.writer.take() {
            w.wake();
        }
        drop(s);
        self.gone.notify_one();
    }
}

impl http_body::Body for BufferedBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let mut s = lock(&self.state);
        match s.spool.pop(READ_CHUNK) {
            Ok(Some(b)) => {
                if let Some(w) = s.writer.take() {
                    w.wake();
                }
                Poll::Ready(Some(Ok(Frame::data(b))))
            }
            Ok(None) => match s.end.take() {
                Some(Ok(())) => {
                    s.end = Some(Ok(()));
                    Poll::Ready(None)
                }
                Some(Err(e)) => Poll::Ready(Some(Err(e))),
                None => {
                    s.reader = Some(cx.waker().clone());
                    Poll::Pending
                }
            },
            Err(e) => Poll::Ready(Some(Err(e))),
        }
    }

    fn is_end_stream(&self) -> bool {
        let s = lock(&self.state);
        s.spool.is_empty() && matches!(s.end, Some(Ok(())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("fb-spool-{tag}-{}", std::process::id()))
    }

    fn drain(s: &mut Spool) -> Vec<u8> {
        let mut out = Vec::new();
        while let Some(b) = s.pop(7).unwrap() {
            out.extend_from_slice(&b);
        }
        out
    }

    #[test]
    fn memory_then_file_in_order_and_nothing_left_on_disk() {
        let d = dir("order");
        let mut s = Spool::new(10, d.clone(), 1 << 20, 4);
        let data: Vec<u8> = (0..100u8).collect();
        assert!(s
            .push(Bytes::copy_from_slice(&data[..6]))
            .unwrap()
            .is_none());
        let created = s.push(Bytes::copy_from_slice(&data[6..30])).unwrap();
        let path = created.expect("the file was made when memory was full");
        assert!(!path.exists(), "unlinked at once");
        assert_eq!(s.in_memory(), 10);
        assert_eq!(s.len(), 30);
        // Memory is full: newer bytes go to the file even after memory drains a little.
        assert_eq!(&s.pop(100).unwrap().unwrap()[..], &data[..6]);
        s.push(Bytes::copy_from_slice(&data[30..40])).unwrap();
        let mut got = data[..6].to_vec();
        got.extend(drain(&mut s));
        assert_eq!(got, &data[..40]);
        // Caught up: memory is used again.
        s.push(Bytes::copy_from_slice(&data[40..45])).unwrap();
        assert_eq!(s.in_memory(), 5);
        assert_eq!(drain(&mut s), &data[40..45]);
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn room_follows_the_limits() {
        let d = dir("room");
        let mut s = Spool::new(4, d.clone(), 8, 1024);
        assert!(s.has_room());
        s.push(Bytes::from_static(b"abcdefgh")).unwrap();
        assert!(s.has_room(), "4 in memory, 4 of 8 in the file");
        s.push(Bytes::from_static(b"ijkl")).unwrap();
        assert!(!s.has_room());
        assert_eq!(&s.pop(100).unwrap().unwrap()[..], b"abcd");
        assert!(
            !s.has_room(),
            "memory is free but the file holds newer bytes"
        );
        let _ = drain(&mut s);
        assert!(s.has_room());
        // No file: memory only, and no room once it is full.
        let mut m = Spool::new(4, d.clone(), 0, 1024);
        m.push(Bytes::from_static(b"abcdef")).unwrap();
        assert!(!m.has_room());
        assert_eq!(drain(&mut m), b"abcdef");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_unusable_directory_keeps_bytes_in_memory() {
        let mut s = Spool::new(2, PathBuf::from("/proc/no/such/dir"), 1 << 20, 1024);
        assert!(s.push(Bytes::from_static(b"abcdef")).unwrap().is_none());
        assert!(!s.has_room());
        assert_eq!(drain(&mut s), b"abcdef");
    }
}
