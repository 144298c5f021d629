//! Response bodies without boxing: nothing, bytes in memory, a file range, or a stream.
//!
//! Files are read with `pread` straight into the buffer handed to the TLS layer, in chunks
//! of [`FILE_CHUNK`], on the connection's own task: for page-cached files this is what nginx
//! does, and it avoids a thread hop per read.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Frame, SizeHint};

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
        })
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

/// A range of an open file.
pub struct FileBody {
    file: Arc<File>,
    offset: u64,
    remaining: u64,
    chunk: usize,
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
                let n = f.remaining.min(f.chunk as u64) as usize;
                let mut buf = BytesMut::zeroed(n);
                match f.file.read_at(&mut buf, f.offset) {
                    Ok(0) => Poll::Ready(Some(Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "file shrank while being sent",
                    )))),
                    Ok(got) => {
                        buf.truncate(got);
                        f.offset += got as u64;
                        f.remaining -= got as u64;
                        Poll::Ready(Some(Ok(Frame::data(buf.freeze()))))
                    }
                    Err(e) => Poll::Ready(Some(Err(e))),
                }
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

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;
    use http_body_util::BodyExt;
    use std::io::Write;

    #[tokio::test]
    async fn file_range_is_read_exactly() {
        let mut tmp = tempfile_in_target();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        tmp.0.write_all(&data).unwrap();
        let body = Body::file(Arc::new(File::open(&tmp.1).unwrap()), 1000, 150_000);
        assert_eq!(body.size_hint().exact(), Some(150_000));
        let got = body.collect().await.unwrap().to_bytes();
        assert_eq!(&got[..], &data[1000..151_000]);
        let _ = std::fs::remove_file(&tmp.1);
    }

    fn tempfile_in_target() -> (File, std::path::PathBuf) {
        let p = std::env::temp_dir().join(format!("fb-body-{}", std::process::id()));
        (File::create(&p).unwrap(), p)
    }
}
