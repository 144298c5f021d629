//! A request body read whole before the upstream is asked (`proxy_request_buffering on`,
//! `fastcgi_request_buffering on`, nginx's defaults): a slow client never holds an upstream
//! connection or a FastCGI worker, the body can go again to the next server, and its length
//! is known. Memory holds `client_body_buffer_size`, the rest a temp file in
//! `client_body_temp_path` (nginx's `a client request body is buffered to a temporary
//! file`); with `client_body_in_file_only` all of it goes to the file. The file is named
//! while the request lives (`$request_body_file`) and removed with the body, unless
//! `client_body_in_file_only on` keeps it, as nginx.
//!
//! Also here: what `$request_body` and `$request_body_file` read ([`RequestBody`]), for a
//! body read whole or one streamed (`off`: [`Capture`] keeps a copy while it fits
//! `client_body_buffer_size`, as nginx's single buffer does).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Frame, SizeHint};

use crate::conf::model::BodyInFileOnly;

/// A whole request body, readable any number of times.
pub struct Stored {
    mem: Vec<Bytes>,
    mem_len: usize,
    mem_max: usize,
    dir: PathBuf,
    in_file: BodyInFileOnly,
    file: Option<File>,
    path: Option<PathBuf>,
    file_len: u64,
}

/// Bytes read from the file at once when the body is sent.
const READ_SIZE: usize = 64 << 10;

impl Stored {
    /// An empty body: memory up to `mem_max`, then a temp file in `dir`; all of it in the
    /// file unless `in_file` is `Off`.
    pub fn new(mem_max: usize, dir: &Path, in_file: BodyInFileOnly) -> Stored {
        Stored {
            mem: Vec::new(),
            mem_len: 0,
            mem_max: if in_file == BodyInFileOnly::Off {
                mem_max
            } else {
                0
            },
            dir: dir.to_path_buf(),
            in_file,
            file: None,
            path: None,
            file_len: 0,
        }
    }

    /// Appends `b`; the temp file's path when this push made it past memory (for nginx's
    /// warning; not with `client_body_in_file_only`, which means it).
    pub fn push(&mut self, b: Bytes) -> io::Result<Option<PathBuf>> {
        if self.file.is_none() && self.mem_len + b.len() <= self.mem_max {
            self.mem_len += b.len();
            self.mem.push(b);
            return Ok(None);
        }
        let made = self.open()?;
        if let Some(f) = &self.file {
            f.write_all_at(&b, self.file_len)?;
            self.file_len += b.len() as u64;
        }
        Ok(made.filter(|_| self.in_file == BodyInFileOnly::Off))
    }

    /// The body is complete: with `client_body_in_file_only`, an empty one gets its
    /// (empty) file too, as nginx.
    pub fn finish(&mut self) -> io::Result<()> {
        if self.in_file != BodyInFileOnly::Off {
            self.open()?;
        }
        Ok(())
    }

    /// Makes the file (once); its path when this call made it.
    fn open(&mut self) -> io::Result<Option<PathBuf>> {
        if self.file.is_some() {
            return Ok(None);
        }
        let (f, path) = super::spool::named_temp_file(&self.dir)?;
        // What memory held moves to the file, which then holds the whole body (as nginx's
        // `$request_body_file`).
        let mut at = 0u64;
        for m in self.mem.drain(..) {
            f.write_all_at(&m, at)?;
            at += m.len() as u64;
        }
        self.mem_len = 0;
        self.file_len = at;
        self.file = Some(f);
        self.path = Some(path.clone());
        Ok(Some(path))
    }

    /// Bytes held.
    pub fn len(&self) -> u64 {
        self.mem_len as u64 + self.file_len
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole body when it is in memory (`$request_body`); None when it went to a file.
    pub fn memory(&self) -> Option<Bytes> {
        if self.file.is_some() {
            return None;
        }
        match self.mem.as_slice() {
            [one] => Some(one.clone()),
            many => Some(many.concat().into()),
        }
    }

    /// The temp file's path (`$request_body_file`), when the body went to one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The `i`th piece of the body (memory first, then the file in 64k reads); None past the
    /// end.
    pub fn piece(&self, i: usize) -> io::Result<Option<Bytes>> {
        if let Some(b) = self.mem.get(i) {
            return Ok(Some(b.clone()));
        }
        let Some(f) = &self.file else {
            return Ok(None);
        };
        let at = ((i - self.mem.len()) * READ_SIZE) as u64;
        if at >= self.file_len {
            return Ok(None);
        }
        let n = (self.file_len - at).min(READ_SIZE as u64) as usize;
        let mut buf = vec![0u8; n];
        f.read_exact_at(&mut buf, at)?;
        Ok(Some(Bytes::from(buf)))
    }
}

impl Drop for Stored {
    fn drop(&mut self) {
        // nginx's clean-up of the request pool: the file goes, unless `in_file_only on`.
        if let Some(p) = &self.path {
            if self.in_file != BodyInFileOnly::On {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

/// A stored body as an upstream request's body (one per try).
pub struct StoredBody {
    stored: Arc<Stored>,
    next: usize,
    left: u64,
}

impl StoredBody {
    /// The body from its first byte.
    pub fn new(stored: Arc<Stored>) -> StoredBody {
        let left = stored.len();
        StoredBody {
            stored,
            next: 0,
            left,
        }
    }
}

impl http_body::Body for StoredBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        loop {
            match this.stored.piece(this.next) {
                Ok(Some(b)) => {
                    this.next += 1;
                    if b.is_empty() {
                        continue;
                    }
                    this.left = this.left.saturating_sub(b.len() as u64);
                    return Poll::Ready(Some(Ok(Frame::data(b))));
                }
                Ok(None) => return Poll::Ready(None),
                Err(e) => return Poll::Ready(Some(Err(e))),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

/// What a streamed body (`proxy_request_buffering off`) left for `$request_body`: a copy
/// while it fits `client_body_buffer_size`, complete once the body ended.
#[derive(Debug, Default)]
pub struct Capture {
    buf: BytesMut,
    max: usize,
    over: bool,
    done: bool,
}

impl Capture {
    /// Keeps up to `max` bytes.
    pub fn new(max: usize) -> Capture {
        Capture {
            max,
            ..Capture::default()
        }
    }

    /// Notes bytes that went by.
    pub fn push(&mut self, b: &[u8]) {
        if self.over || self.buf.len() + b.len() > self.max {
            self.over = true;
            self.buf = BytesMut::new();
            return;
        }
        self.buf.extend_from_slice(b);
    }

    /// The body ended.
    pub fn end(&mut self) {
        self.done = true;
    }
}

/// A request's body as `$request_body` and `$request_body_file` see it.
#[derive(Clone)]
pub enum RequestBody {
    /// Read whole before the upstream was asked.
    Stored(Arc<Stored>),
    /// Streamed to the upstream.
    Streamed(Arc<Mutex<Capture>>),
}

impl RequestBody {
    /// `$request_body`: the body when it was read into memory whole; None otherwise.
    pub fn body(&self) -> Option<Bytes> {
        match self {
            RequestBody::Stored(s) => s.memory(),
            RequestBody::Streamed(c) => {
                let c = c.lock().ok()?;
                (c.done && !c.over).then(|| c.buf.clone().freeze())
            }
        }
    }

    /// `$request_body_file`.
    pub fn file(&self) -> Option<&Path> {
        match self {
            RequestBody::Stored(s) => s.path(),
            RequestBody::Streamed(_) => None,
        }
    }
}

/// Scheduler turns a piece waits, while nothing more comes, for the client's connection to
/// decode more of what it read (hyper hands over one chunk per turn, and its end one later).
const TURNS: u8 = 3;

/// A streamed body that leaves a copy in a [`Capture`], and passes on, as one piece, all the
/// data at hand (up to `client_body_buffer_size`): as nginx reads what has arrived into its
/// buffer and sends that, so chunks or DATA frames that came together go out as one. "At
/// hand" includes what the client's connection can decode from bytes it already read: one
/// few scheduler turns are given to it before a piece goes.
pub struct TeeBody<B: http_body::Body> {
    inner: B,
    capture: Arc<Mutex<Capture>>,
    gather: usize,
    buf: BytesMut,
    /// The turn given to the client's connection before `buf` goes.
    turn: Option<Pin<Box<dyn std::future::Future<Output = ()> + Send>>>,
    /// Turns given since data last came.
    turns: u8,
    /// What the inner body said after the data returned with it (its end, trailers, an
    /// error): given at the next poll.
    held: Option<Option<Result<Frame<Bytes>, B::Error>>>,
    /// The piece [`TeeBody::preread`] took, given first.
    first: Option<Bytes>,
    /// Bytes passed on, and the length the request declared.
    sent: u64,
    declared: Option<u64>,
}

impl<B: http_body::Body> TeeBody<B> {
    /// `inner`, noted into `capture` as it goes by, at most `gather` bytes a piece.
    pub fn new(inner: B, capture: Arc<Mutex<Capture>>, gather: usize) -> TeeBody<B> {
        TeeBody {
            capture,
            gather: gather.max(1),
            buf: BytesMut::new(),
            turn: None,
            turns: 0,
            held: None,
            first: None,
            sent: 0,
            declared: inner.size_hint().exact(),
            inner,
        }
    }

    fn note(&self, d: Option<&[u8]>) {
        if let Ok(mut c) = self.capture.lock() {
            match d {
                Some(d) => c.push(d),
                None => c.end(),
            }
        }
    }

    fn piece(&mut self) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        self.turns = 0;
        self.turn = None;
        self.sent += self.buf.len() as u64;
        Poll::Ready(Some(Ok(Frame::data(self.buf.split().freeze()))))
    }
}

impl<B> TeeBody<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Unpin,
{
    /// Takes the first piece if the client has sent any yet (nginx's preread), without
    /// waiting for more: the upstream gets it with the request's head, in one write.
    pub async fn preread(&mut self) {
        std::future::poll_fn(|cx| match self.poll_piece(cx) {
            Poll::Ready(Some(Ok(f))) => {
                match f.into_data() {
                    Ok(d) => self.first = Some(d),
                    Err(t) => self.held = Some(Some(Ok(t))),
                }
                Poll::Ready(())
            }
            Poll::Ready(other) => {
                self.held = Some(other);
                Poll::Ready(())
            }
            // Mid-turn: the client's connection is decoding more of what came.
            Poll::Pending if !self.buf.is_empty() => Poll::Pending,
            Poll::Pending => Poll::Ready(()),
        })
        .await
    }

    fn poll_piece(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self;
        if let Some(r) = this.held.take() {
            return Poll::Ready(r);
        }
        loop {
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(f))) if f.is_data() => {
                    let Ok(d) = f.into_data() else {
                        unreachable!("a data frame")
                    };
                    this.note(Some(&d));
                    this.buf.extend_from_slice(&d);
                    if this.inner.is_end_stream() {
                        this.note(None);
                    }
                    if this.buf.len() >= this.gather || this.inner.is_end_stream() {
                        return this.piece();
                    }
                    this.turns = 0;
                }
                Poll::Ready(other) => {
                    if other.is_none() {
                        this.note(None);
                    }
                    if this.buf.is_empty() {
                        return Poll::Ready(other);
                    }
                    this.held = Some(other);
                    return this.piece();
                }
                Poll::Pending if this.buf.is_empty() => return Poll::Pending,
                Poll::Pending if this.turns >= TURNS && this.turn.is_none() => return this.piece(),
                Poll::Pending => {
                    if this.turn.is_none() {
                        this.turns += 1;
                    }
                    let turn = this
                        .turn
                        .get_or_insert_with(|| Box::pin(tokio::task::yield_now()));
                    if turn.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    this.turn = None;
                }
            }
        }
    }
}

impl<B> http_body::Body for TeeBody<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        if let Some(d) = this.first.take() {
            return Poll::Ready(Some(Ok(Frame::data(d))));
        }
        this.poll_piece(cx)
    }

    fn is_end_stream(&self) -> bool {
        if self.first.is_some() {
            return false;
        }
        match &self.held {
            Some(None) => true,
            Some(Some(_)) => false,
            None => self.buf.is_empty() && self.inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A streamed body shared by the upstream request, which sends it, and the request, which
/// watches what the client sends after its declared length went: an HTTP/2 client may still
/// send DATA (or end the stream short of it, see `h2::body::BadLength`) after the upstream
/// has the whole body, and nginx answers 400 then, not the upstream's response.
pub struct SharedBody<B: http_body::Body> {
    shared: Arc<Mutex<Shared<B>>>,
}

struct Shared<B: http_body::Body> {
    tee: TeeBody<B>,
    /// The upstream request let the body go (sent, or dropped).
    released: bool,
    waker: Option<std::task::Waker>,
}

impl<B: http_body::Body> SharedBody<B> {
    /// `tee` to send, and its watch: a future that ends when the client's body fails after
    /// the upstream request had all of its declared length.
    pub fn new(tee: TeeBody<B>) -> (SharedBody<B>, Watch<B>) {
        let shared = Arc::new(Mutex::new(Shared {
            tee,
            released: false,
            waker: None,
        }));
        (
            SharedBody {
                shared: shared.clone(),
            },
            Watch { shared },
        )
    }
}

impl<B: http_body::Body> Drop for SharedBody<B> {
    fn drop(&mut self) {
        if let Ok(mut g) = self.shared.lock() {
            g.released = true;
            if let Some(w) = g.waker.take() {
                w.wake();
            }
        }
    }
}

impl<B> http_body::Body for SharedBody<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.shared.lock() {
            Ok(mut g) => http_body::Body::poll_frame(Pin::new(&mut g.tee), cx),
            Err(_) => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.shared
            .lock()
            .map_or(true, |g| http_body::Body::is_end_stream(&g.tee))
    }

    fn size_hint(&self) -> SizeHint {
        self.shared
            .lock()
            .map_or_else(|_| SizeHint::default(), |g| g.tee.size_hint())
    }
}

/// See [`SharedBody::new`].
pub struct Watch<B: http_body::Body> {
    shared: Arc<Mutex<Shared<B>>>,
}

impl<B> Watch<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Unpin,
{
    /// Ends when the client's body fails, or brings more, once the upstream request had all
    /// of its declared length; pending otherwise (and for good once the body ended).
    pub async fn failed(self) {
        std::future::poll_fn(|cx| {
            let Ok(mut g) = self.shared.lock() else {
                return Poll::Pending;
            };
            let g = &mut *g;
            if !g.released {
                g.waker = Some(cx.waker().clone());
                return Poll::Pending;
            }
            let whole = g.tee.declared.is_some_and(|d| g.tee.sent >= d);
            if !whole || http_body::Body::is_end_stream(&g.tee) {
                return Poll::Pending;
            }
            match http_body::Body::poll_frame(Pin::new(&mut g.tee), cx) {
                Poll::Ready(Some(Err(_))) => Poll::Ready(()),
                Poll::Ready(Some(Ok(f))) if f.data_ref().is_some_and(|d| !d.is_empty()) => {
                    Poll::Ready(())
                }
                _ => Poll::Pending,
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(s: &Stored) -> Vec<u8> {
        let mut out = Vec::new();
        let mut i = 0;
        while let Some(p) = s.piece(i).expect("read") {
            out.extend_from_slice(&p);
            i += 1;
        }
        out
    }

    fn dir(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("fb-stored-{name}-{}", std::process::id()))
    }

    #[test]
    fn memory_then_file_read_back_twice() {
        let dir = dir("mem");
        let mut s = Stored::new(10, &dir, BodyInFileOnly::Off);
        assert!(s
            .push(Bytes::from_static(b"0123456"))
            .expect("push")
            .is_none());
        assert_eq!(s.memory().as_deref(), Some(&b"0123456"[..]));
        let made = s.push(Bytes::from(vec![b'x'; 100_000])).expect("push");
        assert!(made.is_some());
        assert!(s.push(Bytes::from_static(b"end")).expect("push").is_none());
        assert_eq!(s.len(), 7 + 100_000 + 3);
        assert!(s.memory().is_none(), "in a file: no $request_body");
        let mut want = b"0123456".to_vec();
        want.extend(vec![b'x'; 100_000]);
        want.extend_from_slice(b"end");
        assert_eq!(all(&s), want);
        assert_eq!(all(&s), want, "a second read gives the same");
        let path = s.path().expect("path").to_path_buf();
        assert_eq!(std::fs::metadata(&path).expect("named").len(), 100_010);
        drop(s);
        assert!(!path.exists(), "removed with the body");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(Stored::new(10, &dir, BodyInFileOnly::Off).is_empty());
    }

    #[test]
    fn in_file_only_keeps_or_cleans() {
        let dir = dir("file");
        let mut s = Stored::new(1000, &dir, BodyInFileOnly::On);
        assert!(s.push(Bytes::from_static(b"abc")).expect("push").is_none());
        s.finish().expect("finish");
        let kept = s.path().expect("path").to_path_buf();
        assert!(s.memory().is_none());
        drop(s);
        assert_eq!(std::fs::read(&kept).expect("kept"), b"abc");
        let mut s = Stored::new(1000, &dir, BodyInFileOnly::Clean);
        s.finish().expect("finish");
        let empty = s.path().expect("an empty body gets its file").to_path_buf();
        assert_eq!(std::fs::read(&empty).expect("empty"), b"");
        drop(s);
        assert!(!empty.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn capture_only_what_fits_and_ended() {
        let mut c = Capture::new(4);
        c.push(b"ab");
        let rb = RequestBody::Streamed(Arc::new(Mutex::new(c)));
        assert!(rb.body().is_none(), "not ended");
        let mut c = Capture::new(4);
        c.push(b"ab");
        c.push(b"cd");
        c.end();
        assert_eq!(
            RequestBody::Streamed(Arc::new(Mutex::new(c)))
                .body()
                .as_deref(),
            Some(&b"abcd"[..])
        );
        let mut c = Capture::new(4);
        c.push(b"abc");
        c.push(b"de");
        c.end();
        assert!(RequestBody::Streamed(Arc::new(Mutex::new(c)))
            .body()
            .is_none());
    }

    /// Frames all at hand.
    struct Frames(std::collections::VecDeque<&'static [u8]>);

    impl http_body::Body for Frames {
        type Data = Bytes;
        type Error = io::Error;
        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
            let d = self.get_mut().0.pop_front();
            Poll::Ready(d.map(|d| Ok(Frame::data(Bytes::from_static(d)))))
        }
    }

    /// Data of a declared length, then an error (an HTTP/2 client sending more).
    struct Overlong(std::collections::VecDeque<Result<Bytes, io::Error>>, u64);

    impl http_body::Body for Overlong {
        type Data = Bytes;
        type Error = io::Error;
        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
            Poll::Ready(self.get_mut().0.pop_front().map(|r| r.map(Frame::data)))
        }
        fn size_hint(&self) -> SizeHint {
            SizeHint::with_exact(self.1)
        }
    }

    #[tokio::test]
    async fn the_watch_sees_a_body_fail_after_its_declared_length() {
        use http_body_util::BodyExt;
        use std::future::Future;
        let inner = Overlong(
            [
                Ok(Bytes::from_static(b"abcd")),
                Err(io::Error::other("more")),
            ]
            .into_iter()
            .collect(),
            4,
        );
        let (mut shared, watch) = SharedBody::new(TeeBody::new(
            inner,
            Arc::new(Mutex::new(Capture::new(9))),
            4,
        ));
        let f = shared.frame().await.expect("frame").expect("ok");
        assert_eq!(f.into_data().expect("data"), "abcd");
        let mut failed = std::pin::pin!(watch.failed());
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(
            failed.as_mut().poll(&mut cx).is_pending(),
            "the upstream request still holds the body"
        );
        drop(shared);
        assert!(failed.as_mut().poll(&mut cx).is_ready());
        // A body that ends at its length: nothing to see.
        let inner = Overlong([Ok(Bytes::from_static(b"abcd"))].into_iter().collect(), 4);
        let (mut shared, watch) = SharedBody::new(TeeBody::new(
            inner,
            Arc::new(Mutex::new(Capture::new(9))),
            4,
        ));
        assert!(shared.frame().await.is_some());
        assert!(shared.frame().await.is_none());
        drop(shared);
        let mut failed = std::pin::pin!(watch.failed());
        assert!(failed.as_mut().poll(&mut cx).is_pending());
    }

    #[tokio::test]
    async fn tee_gathers_what_is_at_hand_and_keeps_a_copy() {
        use http_body_util::BodyExt;
        let inner = Frames([&b"01234"[..], b"many", b"56789"].into_iter().collect());
        let capture = Arc::new(Mutex::new(Capture::new(100)));
        let mut tee = TeeBody::new(inner, capture.clone(), 9);
        let a = tee.frame().await.expect("frame").expect("ok");
        assert_eq!(
            a.into_data().expect("data"),
            "01234many",
            "one piece, up to 9"
        );
        let b = tee.frame().await.expect("frame").expect("ok");
        assert_eq!(b.into_data().expect("data"), "56789");
        assert!(tee.frame().await.is_none());
        let rb = RequestBody::Streamed(capture);
        assert_eq!(rb.body().as_deref(), Some(&b"01234many56789"[..]));
    }
}
