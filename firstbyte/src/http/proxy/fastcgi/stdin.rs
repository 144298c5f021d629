//! `fastcgi_request_buffering on` (nginx's default): the client's body read whole before the
//! FastCGI server is asked, so a slow client never holds one of its workers, the body can
//! go again to the next server, and `CONTENT_LENGTH` is known. Memory holds
//! `client_body_buffer_size`, the rest an unlinked temp file in `client_body_temp_path`
//! (nginx's `a client request body is buffered to a temporary file`); read back as often as
//! the request is sent.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;

/// A whole request body, readable any number of times.
pub struct Stored {
    mem: Vec<Bytes>,
    mem_len: usize,
    mem_max: usize,
    dir: PathBuf,
    file: Option<File>,
    file_len: u64,
}

/// Bytes read from the file at once when the body is sent.
const READ_SIZE: usize = 64 << 10;

impl Stored {
    /// An empty body: memory up to `mem_max`, then a temp file in `dir`.
    pub fn new(mem_max: usize, dir: &Path) -> Stored {
        Stored {
            mem: Vec::new(),
            mem_len: 0,
            mem_max,
            dir: dir.to_path_buf(),
            file: None,
            file_len: 0,
        }
    }

    /// Appends `b`; the temp file's path when this push made it (for the log).
    pub fn push(&mut self, b: Bytes) -> io::Result<Option<PathBuf>> {
        if self.file.is_none() && self.mem_len + b.len() <= self.mem_max {
            self.mem_len += b.len();
            self.mem.push(b);
            return Ok(None);
        }
        let mut made = None;
        if self.file.is_none() {
            let (f, path) = super::super::spool::temp_file(&self.dir)?;
            self.file = Some(f);
            made = Some(path);
        }
        if let Some(f) = &self.file {
            f.write_all_at(&b, self.file_len)?;
            self.file_len += b.len() as u64;
        }
        Ok(made)
    }

    /// Bytes held.
    pub fn len(&self) -> u64 {
        self.mem_len as u64 + self.file_len
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

    #[test]
    fn memory_then_file_read_back_twice() {
        let dir = std::env::temp_dir().join(format!("fb-stdin-{}", std::process::id()));
        let mut s = Stored::new(10, &dir);
        assert!(s
            .push(Bytes::from_static(b"0123456"))
            .expect("push")
            .is_none());
        let made = s.push(Bytes::from(vec![b'x'; 100_000])).expect("push");
        assert!(made.is_some());
        assert!(s.push(Bytes::from_static(b"end")).expect("push").is_none());
        assert_eq!(s.len(), 7 + 100_000 + 3);
        let mut want = b"0123456".to_vec();
        want.extend(vec![b'x'; 100_000]);
        want.extend_from_slice(b"end");
        assert_eq!(all(&s), want);
        assert_eq!(all(&s), want, "a second read gives the same");
        // Unlinked at once: the directory holds nothing.
        assert_eq!(std::fs::read_dir(&dir).expect("dir").count(), 0);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(Stored::new(10, &dir).is_empty());
    }
}
