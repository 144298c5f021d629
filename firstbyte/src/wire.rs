//! The bytes between the server and its privileged broker: a frame is a 4-byte length and a
//! body of fields written by [`Writer`] and read back by [`Reader`] (little-endian integers,
//! length-prefixed byte strings). Descriptors travel after a frame with `SCM_RIGHTS`, in
//! messages of one byte each carrying up to [`FDS_PER_MESSAGE`].

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

/// Largest frame accepted: the sum of every file a configuration reads is far below; a
/// larger length is a broken or hostile peer.
pub const MAX_FRAME: usize = 1 << 30;

/// Descriptors per message (the kernel's limit, SCM_MAX_FD, is 253).
pub const FDS_PER_MESSAGE: usize = 200;

/// Builds a frame body.
#[derive(Debug, Default)]
pub struct Writer(Vec<u8>);

impl Writer {
    /// One byte.
    pub fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    /// Four bytes.
    pub fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// Eight bytes.
    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// A length and the bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    /// A string.
    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    /// A path (bytes, not necessarily UTF-8).
    pub fn path(&mut self, p: &std::path::Path) {
        use std::os::unix::ffi::OsStrExt;
        self.bytes(p.as_os_str().as_bytes());
    }
    /// The body.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

/// Reads a frame body; every read checks the length left.
#[derive(Debug)]
pub struct Reader<'a>(&'a [u8]);

fn short() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "truncated message")
}

impl<'a> Reader<'a> {
    /// Over `b`.
    pub fn new(b: &'a [u8]) -> Self {
        Self(b)
    }
    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(short());
        }
        let (h, t) = self.0.split_at(n);
        self.0 = t;
        Ok(h)
    }
    /// One byte.
    pub fn u8(&mut self) -> io::Result<u8> {
        Ok(self.take(1)?[0])
    }
    /// Four bytes.
    pub fn u32(&mut self) -> io::Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// Eight bytes.
    pub fn u64(&mut self) -> io::Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    /// A length and the bytes.
    pub fn bytes(&mut self) -> io::Result<&'a [u8]> {
        let n = usize::try_from(self.u64()?).map_err(|_| short())?;
        self.take(n)
    }
    /// A string.
    pub fn str(&mut self) -> io::Result<&'a str> {
        std::str::from_utf8(self.bytes()?)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8"))
    }
    /// A path.
    pub fn path(&mut self) -> io::Result<PathBuf> {
        use std::os::unix::ffi::OsStrExt;
        Ok(PathBuf::from(std::ffi::OsStr::from_bytes(self.bytes()?)))
    }
    /// Whether every byte was read.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Sends one frame.
pub fn send(s: &mut UnixStream, body: &[u8]) -> io::Result<()> {
    let n = u32::try_from(body.len()).map_err(|_| io::Error::other("message too large"))?;
    s.write_all(&n.to_le_bytes())?;
    s.write_all(body)
}

/// Receives one frame; `Ok(None)` at a clean end of the stream.
pub fn recv(s: &mut UnixStream) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match s.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let n = u32::from_le_bytes(len) as usize;
    if n > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "frame too large",
        ));
    }
    let mut body = vec![0u8; n];
    s.read_exact(&mut body)?;
    Ok(Some(body))
}

/// Sends descriptors (none: nothing is sent).
pub fn send_fds(s: &UnixStream, fds: &[RawFd]) -> io::Result<()> {
    for chunk in fds.chunks(FDS_PER_MESSAGE) {
        let byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_ptr() as *mut libc::c_void,
            iov_len: 1,
        };
        let data_len = std::mem::size_of_val(chunk);
        // SAFETY: CMSG_SPACE only computes a size.
        let space = unsafe { libc::CMSG_SPACE(data_len as u32) } as usize;
        let mut cbuf = vec![0u64; space.div_ceil(8)];
        // SAFETY: msghdr is plain data; every pointer set below stays valid for the sendmsg
        // call, and the control buffer is CMSG_SPACE bytes, 8-aligned, as CMSG_* expect.
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = space as _;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(data_len as u32) as _;
            std::ptr::copy_nonoverlapping(
                chunk.as_ptr() as *const u8,
                libc::CMSG_DATA(c),
                data_len,
            );
            if libc::sendmsg(s.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) != 1 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Receives `n` descriptors sent by [`send_fds`] (close-on-exec).
pub fn recv_fds(s: &UnixStream, n: usize) -> io::Result<Vec<File>> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let want = (n - out.len()).min(FDS_PER_MESSAGE);
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr() as *mut libc::c_void,
            iov_len: 1,
        };
        // SAFETY: CMSG_SPACE only computes a size.
        let space =
            unsafe { libc::CMSG_SPACE((want * std::mem::size_of::<RawFd>()) as u32) } as usize;
        let mut cbuf = vec![0u64; space.div_ceil(8)];
        // SAFETY: as in send_fds; the kernel writes at most msg_controllen bytes of control
        // data, and each descriptor read out of it is new to this process, owned once.
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = space as _;
            let r = libc::recvmsg(s.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
            if r < 0 {
                return Err(io::Error::last_os_error());
            }
            if r == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "descriptors missing",
                ));
            }
            let mut got = 0;
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                    let bytes = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                    let data = libc::CMSG_DATA(c) as *const RawFd;
                    for i in 0..bytes / std::mem::size_of::<RawFd>() {
                        out.push(File::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                        got += 1;
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
            if msg.msg_flags & libc::MSG_CTRUNC != 0 || got == 0 {
                return Err(io::Error::other("descriptors lost in transit"));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_truncation_is_an_error() {
        let mut w = Writer::default();
        w.u8(7);
        w.u32(70_000);
        w.u64(u64::MAX - 1);
        w.str("héllo");
        w.path(std::path::Path::new("/etc/x.conf"));
        let b = w.into_bytes();
        let mut r = Reader::new(&b);
        assert_eq!(r.u8().unwrap(), 7);
        assert_eq!(r.u32().unwrap(), 70_000);
        assert_eq!(r.u64().unwrap(), u64::MAX - 1);
        assert_eq!(r.str().unwrap(), "héllo");
        assert_eq!(r.path().unwrap(), PathBuf::from("/etc/x.conf"));
        assert!(r.is_empty());
        for cut in 0..b.len() {
            let mut r = Reader::new(&b[..cut]);
            let all = (|| -> io::Result<()> {
                r.u8()?;
                r.u32()?;
                r.u64()?;
                r.str()?;
                r.path()?;
                Ok(())
            })();
            assert!(all.is_err(), "cut at {cut}");
        }
        // A huge length is refused, not allocated.
        let mut w = Writer::default();
        w.u64(u64::MAX);
        let b = w.into_bytes();
        assert!(Reader::new(&b).bytes().is_err());
    }

    #[test]
    fn frames_and_descriptors_cross_a_socketpair() {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        send(&mut a, b"hello").unwrap();
        let files: Vec<File> = (0..(FDS_PER_MESSAGE + 3))
            .map(|_| File::open("/dev/null").unwrap())
            .collect();
        let raw: Vec<RawFd> = files.iter().map(|f| f.as_raw_fd()).collect();
        send_fds(&a, &raw).unwrap();
        send(&mut a, b"after").unwrap();
        assert_eq!(recv(&mut b).unwrap().unwrap(), b"hello");
        let got = recv_fds(&b, raw.len()).unwrap();
        assert_eq!(got.len(), raw.len());
        assert!(got.iter().all(|f| f.metadata().is_ok()));
        assert_eq!(recv(&mut b).unwrap().unwrap(), b"after");
        drop(a);
        assert!(recv(&mut b).unwrap().is_none());
    }
}
