//! Response bodies without boxing: nothing, bytes in memory, a file range, or a stream.
//!
//! Files are read with `pread` straight into the buffer handed to the TLS layer, in chunks
//! of [`FILE_CHUNK`], on the connection's own task: for page-cached files this is what nginx
//! does, and it avoids a thread hop per read. On a connection that can `sendfile` (plain
//! HTTP/1.1 with `sendfile on`), a file body reads nothing: each frame queues its file range
//! with the connection's [`IoControl`] and yields a marker that the socket layer turns into a
//! `sendfile(2)` call (see `net::SocketStream`).
//!
//! [`StallBody`] wraps a request body to enforce `client_body_timeout`; [`LimitBody`] counts
//! the bytes that arrive against `client_max_body_size` (a chunked or HTTP/2 body declares no
//! length, so the header check alone cannot see them).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::{Frame, SizeHint};

pub use super::charset::Recode;
use crate::net::{FileRange, IoControl, StallTimer};

/// Bytes read from a file per frame: 64 KiB, four full TLS records, few syscalls per MB.
pub const FILE_CHUNK: usize = 64 * 1024;

/// A boxed stream body (compression, proxied responses).
pub type BoxBody = http_body_util::combinators::UnsyncBoxBody<Bytes, std::io::Error>;

/// A response body.
#[derive(Default)]
pub enum Body {
    /// No body.
    #[default]
    Empty,
    /// Bytes in memory, sent as one frame.
    Full(Option<Bytes>),
    /// `len` bytes of `file` from `offset`.
    File(FileBody),
    /// Anything else.
    Stream(BoxBody),
}

impl Body {
    /// A body of these bytes.
    pub fn full(b: impl Into<Bytes>) -> Self {
        let b = b.into();
        if b.is_empty() {
            Body::Empty
        } else {
            Body::Full(Some(b))
        }
    }

    /// `len` bytes of `file` starting at `offset`.
    pub fn file(file: Arc<File>, offset: u64, len: u64) -> Self {
        Body::File(FileBody {
            file,
            offset,
            remaining: len,
            chunk: FILE_CHUNK,
            sendfile: None,
            recode: None,
        })
    }

    /// Recodes a file body's bytes with `table` as they are read (`charset` with
    /// `source_charset`); such a body is read, never sent with `sendfile`.
    pub fn set_recode(&mut self, table: Recode) {
        if let Body::File(f) = self {
            f.sendfile = None;
            f.recode = Some(table);
        }
    }

    /// Sends a file body with `sendfile` through `ctl`'s socket (no effect on other bodies).
    /// `nopush`: `tcp_nopush on`, cork the head and the file together.
    pub fn set_sendfile(&mut self, ctl: &Arc<IoControl>, nopush: bool) {
        if let Body::File(f) = self {
            if f.recode.is_some() {
                return;
            }
            f.sendfile = Some(SendfileTo {
                ctl: ctl.clone(),
                nopush,
            });
        }
    }

    /// Whether this is a file body that will be sent with `sendfile`.
    pub fn uses_sendfile(&self) -> bool {
        matches!(self, Body::File(f) if f.sendfile.is_some())
    }

    /// Sets the bytes read per frame of a file body (no effect on other bodies). HTTP/2 uses
    /// one TLS record's worth minus the 9-byte frame header, so that each DATA frame the h2
    /// layer writes (and flushes) fills exactly one record instead of one full record and a
    /// 9-byte one.
    pub fn set_chunk(&mut self, n: usize) {
        if let Body::File(f) = self {
            f.chunk = n.max(1);
        }
    }
}

impl Body {
    /// Whether the body's bytes can be read straight into a caller's buffer
    /// ([`Body::read_into`]): a file body that is read (not sent with `sendfile`) and has bytes
    /// left.
    pub fn reads_into(&self) -> bool {
        matches!(self, Body::File(f) if f.sendfile.is_none() && f.remaining > 0)
    }

    /// Appends up to `max` of the body's next bytes to `out` — for a file body, one `pread`
    /// straight into `out`'s spare capacity, recoded there in place (HTTP/2 reads into the
    /// DATA frame that will carry the bytes: no copy in user space). `None` for a body that
    /// does not [read into](Body::reads_into) a buffer: poll its frames. An error when the
    /// file ended early (it shrank while being sent).
    pub fn read_into(&mut self, out: &mut Vec<u8>, max: usize) -> Option<std::io::Result<usize>> {
        let Body::File(f) = self else {
            return None;
        };
        if f.sendfile.is_some() || f.remaining == 0 {
            return None;
        }
        let n = f.remaining.min(max as u64) as usize;
        let start = out.len();
        let got = pread_append(&f.file, out, n, f.offset);
        Some(f.took(n, got, &mut out[start..]))
    }
}

/// A range of an open file.
pub struct FileBody {
    file: Arc<File>,
    offset: u64,
    remaining: u64,
    chunk: usize,
    sendfile: Option<SendfileTo>,
    recode: Option<Recode>,
}

/// Where a `sendfile` body queues its ranges.
struct SendfileTo {
    ctl: Arc<IoControl>,
    nopush: bool,
}

impl FileBody {
    /// The next frame as a marker for the socket layer (no read).
    fn marker_frame(&mut self) -> Option<Bytes> {
        let to = self.sendfile.as_ref()?;
        let n = self.remaining.min(crate::net::MARKER_LEN as u64);
        to.ctl.push_range(FileRange {
            file: self.file.clone(),
            offset: self.offset,
            len: n,
            last: n == self.remaining,
            nopush: to.nopush,
        });
        self.offset += n;
        self.remaining -= n;
        Some(crate::net::marker(n as usize))
    }

    /// Takes the outcome of a read of `wanted` bytes at the body's offset, `appended` being
    /// the bytes it appended: advances past them and recodes them in place. Nothing read
    /// when something was wanted means the file shrank while being sent: an error.
    fn took(
        &mut self,
        wanted: usize,
        got: std::io::Result<usize>,
        appended: &mut [u8],
    ) -> std::io::Result<usize> {
        let got = got?;
        if got == 0 && wanted > 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "file shrank while being sent",
            ));
        }
        self.offset += got as u64;
        self.remaining -= got as u64;
        if let Some(t) = &self.recode {
            t.apply(appended);
        }
        Ok(got)
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            Body::Empty => Poll::Ready(None),
            Body::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Body::File(f) => {
                if f.remaining == 0 {
                    return Poll::Ready(None);
                }
                if let Some(m) = f.marker_frame() {
                    return Poll::Ready(Some(Ok(Frame::data(m))));
                }
                let n = f.remaining.min(f.chunk as u64) as usize;
                let mut buf = BytesMut::with_capacity(n);
                let got = pread_uninit(&f.file, &mut buf, n, f.offset);
                Poll::Ready(Some(
                    f.took(n, got, &mut buf).map(|_| Frame::data(buf.freeze())),
                ))
            }
            Body::Stream(s) => Pin::new(s).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Empty => true,
            Body::Full(b) => b.is_none(),
            Body::File(f) => f.remaining == 0,
            Body::Stream(s) => s.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Empty => SizeHint::with_exact(0),
            Body::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Body::File(f) => SizeHint::with_exact(f.remaining),
            Body::Stream(s) => s.size_hint(),
        }
    }
}

/// `pread` of up to `n` bytes at `offset` into `buf`'s spare capacity, appended. Unlike
/// `read_at` on a zeroed buffer, nothing is written twice: no 64 KB memset before each read
/// of a long body.
pub(crate) fn pread_uninit(
    file: &File,
    buf: &mut BytesMut,
    n: usize,
    offset: u64,
) -> std::io::Result<usize> {
    let got = pread_spare(file, buf.spare_capacity_mut(), n, offset)?;
    // SAFETY: `pread_spare` initialized the first `got` bytes of the spare capacity.
    unsafe { buf.set_len(buf.len() + got) };
    Ok(got)
}

/// [`pread_uninit`] into a `Vec`: appends up to `n` bytes (the `Vec` grows to take them).
pub(crate) fn pread_append(
    file: &File,
    buf: &mut Vec<u8>,
    n: usize,
    offset: u64,
) -> std::io::Result<usize> {
    buf.reserve(n);
    let got = pread_spare(file, buf.spare_capacity_mut(), n, offset)?;
    // SAFETY: `pread_spare` initialized the first `got` bytes of the spare capacity.
    unsafe { buf.set_len(buf.len() + got) };
    Ok(got)
}

/// `pread` of up to `n` bytes at `offset` into the start of `spare`; how many bytes it
/// initialized there (≤ `n`, ≤ `spare.len()`).
fn pread_spare(
    file: &File,
    spare: &mut [std::mem::MaybeUninit<u8>],
    n: usize,
    offset: u64,
) -> std::io::Result<usize> {
    let offset = libc::off_t::try_from(offset)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let n = n.min(spare.len());
    let ptr = spare.as_mut_ptr().cast::<libc::c_void>();
    loop {
        // SAFETY: `ptr` points to at least `n` writable bytes of `spare`, which nothing else
        // touches during the call; the descriptor is open while `file` lives.
        let r = unsafe { libc::pread(file.as_raw_fd(), ptr, n, offset) };
        if let Ok(got) = usize::try_from(r) {
            return Ok(got.min(n));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// A request body that fails when the client sends nothing for `client_body_timeout`
/// (between two successive reads, nginx's meaning), and says so in `timed_out`.
pub struct StallBody<B> {
    inner: B,
    limit: Duration,
    timer: StallTimer,
    timed_out: Arc<AtomicBool>,
}

impl<B> StallBody<B> {
    /// Wraps `inner`; `timed_out` is set when the limit passes (zero: no limit).
    pub fn new(inner: B, limit: Duration, timed_out: Arc<AtomicBool>) -> Self {
        Self {
            inner,
            limit,
            timer: StallTimer::default(),
            timed_out,
        }
    }
}

/// `client_body_timeout` passed.
#[derive(Debug, thiserror::Error)]
#[error("client timed out (110: Connection timed out) while reading client request body")]
pub struct BodyTimeout;

impl<B> http_body::Body for StallBody<B>
where
    B: http_body::Body + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = B::Data;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => {
                if this.timer.expired(cx, this.limit) {
                    this.timed_out.store(true, Ordering::Relaxed);
                    return Poll::Ready(Some(Err(Box::new(BodyTimeout))));
                }
                Poll::Pending
            }
            Poll::Ready(r) => {
                this.timer.progress();
                Poll::Ready(r.map(|f| f.map_err(Into::into)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A request body that fails as soon as more than `limit` bytes of data arrived
/// (`client_max_body_size` counted on the bytes, nginx's "client intended to send too large
/// body"): the frame that crosses the limit is not passed on, so the upstream never sees it,
/// and `exceeded` says why the body failed. A limit of 0 is no limit.
pub struct LimitBody<B> {
    inner: B,
    limit: u64,
    seen: u64,
    exceeded: Arc<AtomicBool>,
}

impl<B> LimitBody<B> {
    /// Wraps `inner`.
    pub fn new(inner: B, limit: u64, exceeded: Arc<AtomicBool>) -> Self {
        Self {
            inner,
            limit,
            seen: 0,
            exceeded,
        }
    }
}

/// `client_max_body_size` passed while the body arrived.
#[derive(Debug, thiserror::Error)]
#[error("client intended to send too large body")]
pub struct BodyTooLarge;

fn client_fault(e: &(dyn std::error::Error + 'static)) -> bool {
    e.is::<BodyTooLarge>()
        || e.is::<BodyTimeout>()
        || e.is::<crate::http::contract::LengthMismatch>()
}

/// Whether `e` (an error from a request body, through any wrappers) is the client's fault:
/// its body was too large or stalled ([`BodyTooLarge`], [`BodyTimeout`]), or an HTTP/2 body
/// or HTTP/3 body did not match its `content-length` (`contract::LengthMismatch`: 400).
pub fn is_client_body_error(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if client_fault(err) {
            return true;
        }
        // `io::Error::other(e)` hides `e` from `source()` (it returns `e`'s own source), and
        // may wrap another such io::Error.
        cur = match err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    false
}

impl<B> http_body::Body for LimitBody<B>
where
    B: http_body::Body + Unpin,
    B::Data: bytes::Buf,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = B::Data;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, Self::Error>>> {
        let this = self.get_mut();
        if this.exceeded.load(Ordering::Relaxed) {
            return Poll::Ready(Some(Err(Box::new(BodyTooLarge))));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(f))) => {
                if let Some(d) = f.data_ref() {
                    this.seen = this.seen.saturating_add(bytes::Buf::remaining(d) as u64);
                    if this.limit > 0 && this.seen > this.limit {
                        this.exceeded.store(true, Ordering::Relaxed);
                        return Poll::Ready(Some(Err(Box::new(BodyTooLarge))));
                    }
                }
                Poll::Ready(Some(Ok(f)))
            }
            Poll::Ready(r) => Poll::Ready(r.map(|f| f.map_err(Into::into))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;
    use http_body_util::BodyExt;
    use std::io::Write;

    #[tokio::test]
    async fn file_range_is_read_exactly() {
        let mut tmp = tempfile_in_target("range");
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        tmp.0.write_all(&data).unwrap();
        let body = Body::file(Arc::new(File::open(&tmp.1).unwrap()), 1000, 150_000);
        assert_eq!(body.size_hint().exact(), Some(150_000));
        let got = body.collect().await.unwrap().to_bytes();
        assert_eq!(&got[..], &data[1000..151_000]);
        let _ = std::fs::remove_file(&tmp.1);
    }

    #[tokio::test]
    async fn sendfile_bodies_queue_ranges_and_yield_markers() {
        let mut tmp = tempfile_in_target("sendfile");
        tmp.0.write_all(&[7u8; 100]).unwrap();
        let ctl = Arc::new(IoControl::new(Duration::from_secs(60), true));
        let mut body = Body::file(Arc::new(File::open(&tmp.1).unwrap()), 10, 80);
        body.set_sendfile(&ctl, true);
        assert!(body.uses_sendfile());
        assert_eq!(body.size_hint().exact(), Some(80));
        let got = body.collect().await.unwrap().to_bytes();
        assert_eq!(got.len(), 80);
        assert!(crate::net::is_marker(&got), "the file was read instead");
        assert_eq!(ctl.queued(), 1);
        // Other bodies are left alone.
        let mut full = Body::full("x");
        full.set_sendfile(&ctl, false);
        assert!(!full.uses_sendfile());
        let _ = std::fs::remove_file(&tmp.1);
    }

    /// A file range read into a buffer that already holds bytes (a frame header) arrives
    /// whole, in order, after them, at most `max` bytes a read; then the body is ended.
    #[test]
    fn file_bodies_read_into_the_callers_buffer() {
        let mut tmp = tempfile_in_target("into");
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
        tmp.0.write_all(&data).unwrap();
        let mut body = Body::file(Arc::new(File::open(&tmp.1).unwrap()), 777, 50_000);
        assert!(body.reads_into());
        let mut got = Vec::new();
        let mut reads = 0;
        while body.reads_into() {
            let mut out = b"HEADER".to_vec();
            let n = body.read_into(&mut out, 16_375).unwrap().unwrap();
            assert_eq!(&out[..6], b"HEADER", "the bytes before are kept");
            assert_eq!(out.len(), 6 + n);
            assert!(n <= 16_375);
            got.extend_from_slice(&out[6..]);
            reads += 1;
        }
        assert_eq!(reads, 4, "50,000 bytes in frames of 16,375");
        assert_eq!(got, &data[777..50_777]);
        assert!(body.is_end_stream());
        assert!(body.read_into(&mut Vec::new(), 10).is_none(), "ended");
        // A file that shrank under the body is an error, not an endless stream of empty reads.
        let mut short = Body::file(Arc::new(File::open(&tmp.1).unwrap()), 99_990, 100);
        let mut out = Vec::new();
        assert_eq!(short.read_into(&mut out, 1000).unwrap().unwrap(), 10);
        let e = short.read_into(&mut out, 1000).unwrap().unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
        // Bodies that are not read from a file are polled instead.
        assert!(!Body::full("x").reads_into());
        assert!(Body::full("x").read_into(&mut out, 10).is_none());
        let ctl = Arc::new(IoControl::new(Duration::from_secs(60), true));
        let mut sf = Body::file(Arc::new(File::open(&tmp.1).unwrap()), 0, 10);
        sf.set_sendfile(&ctl, false);
        assert!(!sf.reads_into());
        assert!(sf.read_into(&mut out, 10).is_none());
        let _ = std::fs::remove_file(&tmp.1);
    }

    /// A request body whose client sends one frame and then nothing.
    struct OneThenSilence(Option<Bytes>);

    impl http_body::Body for OneThenSilence {
        type Data = Bytes;
        type Error = std::io::Error;
        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            match self.get_mut().0.take() {
                Some(b) => Poll::Ready(Some(Ok(Frame::data(b)))),
                None => Poll::Pending,
            }
        }
    }

    #[tokio::test]
    async fn stalled_request_bodies_time_out() {
        let flag = Arc::new(AtomicBool::new(false));
        let inner = OneThenSilence(Some(Bytes::from_static(b"ab")));
        let mut body = StallBody::new(inner, Duration::from_millis(150), flag.clone());
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "ab");
        assert!(!flag.load(Ordering::Relaxed));
        let start = std::time::Instant::now();
        let e = body.frame().await.unwrap().unwrap_err();
        assert!(e.is::<BodyTimeout>());
        assert!(flag.load(Ordering::Relaxed));
        assert!(start.elapsed() >= Duration::from_millis(150));
    }

    /// A request body of these frames.
    struct Frames(std::collections::VecDeque<Bytes>);

    impl http_body::Body for Frames {
        type Data = Bytes;
        type Error = std::io::Error;
        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            Poll::Ready(self.get_mut().0.pop_front().map(|b| Ok(Frame::data(b))))
        }
    }

    fn frames(sizes: &[usize]) -> Frames {
        Frames(sizes.iter().map(|&n| Bytes::from(vec![b'x'; n])).collect())
    }

    #[tokio::test]
    async fn limit_body_stops_at_the_frame_that_crosses() {
        let flag = Arc::new(AtomicBool::new(false));
        let mut body = LimitBody::new(frames(&[4, 6, 1, 5]), 10, flag.clone());
        assert_eq!(
            body.frame()
                .await
                .unwrap()
                .unwrap()
                .into_data()
                .unwrap()
                .len(),
            4
        );
        // 4 + 6 = 10: exactly the limit passes.
        assert_eq!(
            body.frame()
                .await
                .unwrap()
                .unwrap()
                .into_data()
                .unwrap()
                .len(),
            6
        );
        assert!(!flag.load(Ordering::Relaxed));
        let e = body.frame().await.unwrap().unwrap_err();
        assert!(e.is::<BodyTooLarge>());
        assert!(flag.load(Ordering::Relaxed));
        // Nothing after the crossing frame comes through.
        assert!(body.frame().await.unwrap().is_err());
        // Through the wrappers the proxy puts around it, it is still recognised.
        let wrapped = std::io::Error::other(e);
        assert!(is_client_body_error(&wrapped));
        assert!(!is_client_body_error(&std::io::Error::other("upstream")));
    }

    #[tokio::test]
    async fn limit_zero_is_no_limit() {
        let flag = Arc::new(AtomicBool::new(false));
        let body = LimitBody::new(frames(&[1 << 20, 1 << 20, 1 << 20]), 0, flag.clone());
        let got = body.collect().await.unwrap().to_bytes();
        assert_eq!(got.len(), 3 << 20);
        assert!(!flag.load(Ordering::Relaxed));
    }

    #[test]
    fn pread_uninit_appends_what_the_file_has() {
        let (mut f, p) = tempfile_in_target("pread");
        f.write_all(b"0123456789").unwrap();
        let f = File::open(&p).unwrap();
        let mut buf = BytesMut::with_capacity(64);
        assert_eq!(pread_uninit(&f, &mut buf, 64, 4).unwrap(), 6);
        assert_eq!(&buf[..], b"456789");
        assert_eq!(
            pread_uninit(&f, &mut buf, 64, 10).unwrap(),
            0,
            "end of file"
        );
        let mut small = BytesMut::with_capacity(3);
        let n = pread_uninit(&f, &mut small, 64, 0).unwrap();
        assert!(
            (3..=64).contains(&n) && small[..3] == *b"012",
            "bounded by capacity"
        );
        let _ = std::fs::remove_file(&p);
    }

    fn tempfile_in_target(tag: &str) -> (File, std::path::PathBuf) {
        let p = std::env::temp_dir().join(format!("fb-body-{tag}-{}", std::process::id()));
        (File::create(&p).unwrap(), p)
    }
}
