//! A cached response on disk: one file per key, named by the key's MD5 under the zone's
//! levels. It begins with a header block (magic, validity, the key, the status and header
//! fields), then the body. A response is written to a temp file beside its final name
//! (`create_new`, mode 0600) and renamed there only once its body is complete; a file whose
//! key differs from the one asked for (an MD5 collision) or that does not parse is a miss.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

const MAGIC: &[u8; 8] = b"FBCACHE1";
/// Where the validity (u64, little-endian Unix seconds) is, for a revalidation's rewrite.
const VALID_AT: u64 = 8;
/// Magic, validity, header block length.
const FIXED: usize = 8 + 8 + 4;
/// Largest header block read back.
const MAX_HEAD: usize = 1 << 20;

/// A stored response's head.
#[derive(Debug, Clone)]
pub struct Head {
    /// Fresh until (Unix seconds).
    pub valid: u64,
    /// The upstream's `Cache-Control` extensions: served while updating for this many
    /// seconds past `valid` (`stale-while-revalidate`), and on an error
    /// (`stale-while-revalidate`, `stale-if-error`).
    pub stale: Stale,
    /// Status.
    pub status: StatusCode,
    /// Header fields as stored.
    pub headers: HeaderMap,
    /// The request's values of the response's `Vary` fields (empty: none).
    pub variant: Vec<u8>,
    /// Where the body starts in the file.
    pub body_at: u64,
    /// The body's length.
    pub body_len: u64,
}

/// Seconds past its validity a stored response may still be served: nginx's `updating_sec`
/// and `error_sec`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stale {
    /// While it is being updated.
    pub updating: u64,
    /// When the upstream fails.
    pub error: u64,
}

/// The header block of a response.
pub fn encode_head(
    valid: u64,
    stale: Stale,
    key: &[u8],
    variant: &[u8],
    status: StatusCode,
    headers: &HeaderMap,
) -> Vec<u8> {
    let mut block = Vec::new();
    block.extend_from_slice(&(key.len() as u32).to_le_bytes());
    block.extend_from_slice(key);
    block.extend_from_slice(&(variant.len() as u32).to_le_bytes());
    block.extend_from_slice(variant);
    block.extend_from_slice(&status.as_u16().to_le_bytes());
    block.extend_from_slice(&(headers.len() as u32).to_le_bytes());
    for (n, v) in headers {
        block.extend_from_slice(&(n.as_str().len() as u32).to_le_bytes());
        block.extend_from_slice(n.as_str().as_bytes());
        block.extend_from_slice(&(v.len() as u32).to_le_bytes());
        block.extend_from_slice(v.as_bytes());
    }
    // After the fields (a file written before they existed has none: 0).
    block.extend_from_slice(&stale.updating.to_le_bytes());
    block.extend_from_slice(&stale.error.to_le_bytes());
    let mut out = Vec::with_capacity(FIXED + block.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&valid.to_le_bytes());
    out.extend_from_slice(&(block.len() as u32).to_le_bytes());
    out.extend_from_slice(&block);
    out
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u32(&mut self) -> Option<usize> {
        let b = self.take(4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

/// Parses a header block (after the fixed part) for `key`; None: not this key's, or broken.
pub fn decode_block(block: &[u8], key: &[u8]) -> Option<(StatusCode, HeaderMap, Vec<u8>, Stale)> {
    let (status, headers, variant, stale) = decode(block, key)?;
    Some((status, headers, variant, stale.unwrap_or_default()))
}

/// [`decode_block`], with None as the extensions of a block written before they existed.
#[allow(clippy::type_complexity)]
fn decode(block: &[u8], key: &[u8]) -> Option<(StatusCode, HeaderMap, Vec<u8>, Option<Stale>)> {
    let mut c = Cursor(block);
    let klen = c.u32()?;
    if c.take(klen)? != key {
        return None;
    }
    let vlen = c.u32()?;
    let variant = c.take(vlen)?.to_vec();
    let s = c.take(2)?;
    let status = StatusCode::from_u16(u16::from_le_bytes([s[0], s[1]])).ok()?;
    let n = c.u32()?;
    let mut headers = HeaderMap::new();
    for _ in 0..n {
        let l = c.u32()?;
        let name = HeaderName::from_bytes(c.take(l)?).ok()?;
        let l = c.u32()?;
        let value = HeaderValue::from_bytes(c.take(l)?).ok()?;
        headers.append(name, value);
    }
    let stale = if c.0.is_empty() {
        None
    } else {
        Some(Stale {
            updating: c.u64()?,
            error: c.u64()?,
        })
    };
    Some((status, headers, variant, stale))
}

/// Opens the stored response of `key` at `path`; None when there is none (or it is broken
/// or another key's).
pub fn open(path: &Path, key: &[u8]) -> Option<(File, Head)> {
    let mut f = File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let mut fixed = [0u8; FIXED];
    f.read_exact(&mut fixed).ok()?;
    if &fixed[..8] != MAGIC {
        return None;
    }
    let valid = u64::from_le_bytes(fixed[8..16].try_into().ok()?);
    let blen = u32::from_le_bytes(fixed[16..20].try_into().ok()?) as usize;
    if blen > MAX_HEAD || (FIXED + blen) as u64 > len {
        return None;
    }
    let mut block = vec![0u8; blen];
    f.read_exact(&mut block).ok()?;
    let (status, headers, variant, stale) = decode_block(&block, key)?;
    let body_at = (FIXED + blen) as u64;
    f.seek(SeekFrom::Start(body_at)).ok()?;
    Some((
        f,
        Head {
            valid,
            stale,
            status,
            headers,
            variant,
            body_at,
            body_len: len - body_at,
        },
    ))
}

/// Rewrites the validity and the `stale-*` times of the stored file of `key` at `path` (a
/// revalidation's 304), when it is still `same` (the file the revalidation began with: a
/// response stored since then is left as it is, as nginx's header update checks the file
/// it read). A file written before the times were stored gets its validity alone.
pub fn set_valid(
    path: &Path,
    same: &File,
    key: &[u8],
    valid: u64,
    stale: Stale,
) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let mut f = OpenOptions::new().read(true).write(true).open(path)?;
    let (a, b) = (f.metadata()?, same.metadata()?);
    if (a.dev(), a.ino()) != (b.dev(), b.ino()) {
        return Ok(());
    }
    let mut fixed = [0u8; FIXED];
    f.read_exact(&mut fixed)?;
    let blen = u32::from_le_bytes([fixed[16], fixed[17], fixed[18], fixed[19]]) as usize;
    let broken = || std::io::Error::from(std::io::ErrorKind::InvalidData);
    if &fixed[..8] != MAGIC || blen > MAX_HEAD || ((FIXED + blen) as u64) > a.len() {
        return Err(broken());
    }
    let mut block = vec![0u8; blen];
    f.read_exact(&mut block)?;
    let (_, _, _, old) = decode(&block, key).ok_or_else(broken)?;
    if old.is_some() {
        let mut times = [0u8; 16];
        times[..8].copy_from_slice(&stale.updating.to_le_bytes());
        times[8..].copy_from_slice(&stale.error.to_le_bytes());
        f.write_all_at(&times, (FIXED + blen - 16) as u64)?;
    }
    f.write_all_at(&valid.to_le_bytes(), VALID_AT)
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// A response being written; removed unless [`Writer::commit`] renames it.
#[derive(Debug)]
pub struct Writer {
    file: Option<File>,
    tmp: PathBuf,
    dest: PathBuf,
    /// Body bytes written.
    pub written: u64,
    limit: u64,
}

impl Writer {
    /// Starts the file of `dest` with `head`; `limit`: most body bytes (0: none). The
    /// directories up to `dest` are made (mode 0700) as needed.
    pub fn create(dest: &Path, head: &[u8], limit: u64) -> std::io::Result<Writer> {
        if let Some(dir) = dest.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let mut tmp = dest.as_os_str().to_os_string();
        tmp.push(format!(".{}.{n}.tmp", std::process::id()));
        let tmp = PathBuf::from(tmp);
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        let mut w = Writer {
            file: None,
            tmp,
            dest: dest.to_path_buf(),
            written: 0,
            limit,
        };
        file.write_all(head)?;
        w.file = Some(file);
        Ok(w)
    }

    /// Appends body bytes; false once the file failed or passed the limit (it is then
    /// dropped).
    pub fn write(&mut self, data: &[u8]) -> bool {
        let Some(f) = self.file.as_mut() else {
            return false;
        };
        self.written += data.len() as u64;
        if (self.limit > 0 && self.written > self.limit) || f.write_all(data).is_err() {
            self.abandon();
            return false;
        }
        true
    }

    /// Whether the file is still being written.
    pub fn alive(&self) -> bool {
        self.file.is_some()
    }

    /// Renames the complete file to its name; its size on disk.
    pub fn commit(mut self) -> Option<u64> {
        let f = self.file.take()?;
        let size = f.metadata().ok()?.len();
        drop(f);
        match std::fs::rename(&self.tmp, &self.dest) {
            Ok(()) => Some(size),
            Err(_) => {
                let _ = std::fs::remove_file(&self.tmp);
                None
            }
        }
    }

    fn abandon(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.abandon();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_round_trips_and_checks_its_key() {
        let mut h = HeaderMap::new();
        h.append("content-type", HeaderValue::from_static("text/html"));
        h.append("x-a", HeaderValue::from_static("1"));
        h.append("x-a", HeaderValue::from_static("2"));
        let ext = Stale {
            updating: 5,
            error: 9,
        };
        let bytes = encode_head(77, ext, b"key", b"v", StatusCode::NOT_FOUND, &h);
        let (s, back, v, st) = decode_block(&bytes[FIXED..], b"key").expect("parses");
        assert_eq!(st, ext);
        assert_eq!(v, b"v");
        assert_eq!(s, StatusCode::NOT_FOUND);
        assert_eq!(back, h);
        assert!(decode_block(&bytes[FIXED..], b"other").is_none());
        assert!(decode_block(&bytes[FIXED..bytes.len() - 1], b"key").is_none());
    }

    #[test]
    fn only_a_committed_file_is_found() {
        let dir = std::env::temp_dir().join(format!("fb-cache-store-{}", std::process::id()));
        let dest = dir.join("a/bc/file");
        let head = encode_head(
            5,
            Stale::default(),
            b"k",
            b"",
            StatusCode::OK,
            &HeaderMap::new(),
        );
        let mut w = Writer::create(&dest, &head, 0).expect("create");
        assert!(w.write(b"hello"));
        assert!(open(&dest, b"k").is_none());
        let size = w.commit().expect("commit");
        let (mut f, h) = open(&dest, b"k").expect("open");
        assert_eq!((h.valid, h.body_len, size), (5, 5, h.body_at + 5));
        let mut body = String::new();
        f.read_to_string(&mut body).expect("read");
        assert_eq!(body, "hello");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dest).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let ext = Stale {
            updating: 7,
            error: 8,
        };
        set_valid(&dest, &f, b"k", 99, ext).expect("revalidate");
        let (_, h) = open(&dest, b"k").expect("open");
        assert_eq!((h.valid, h.stale, h.body_len), (99, ext, 5));
        // A file stored since the revalidation began is left alone.
        let mut w = Writer::create(&dest, &head, 0).expect("create");
        assert!(w.write(b"again"));
        w.commit().expect("commit");
        set_valid(&dest, &f, b"k", 1234, ext).expect("revalidate");
        let (_, h) = open(&dest, b"k").expect("open");
        assert_eq!((h.valid, h.stale), (5, Stale::default()));
        // Past the limit: dropped, nothing left behind.
        let mut w = Writer::create(&dir.join("big"), &head, 3).expect("create");
        assert!(!w.write(b"hello"));
        assert!(w.commit().is_none());
        assert!(!dir.join("big").exists());
        let left: Vec<_> = std::fs::read_dir(&dir).expect("dir").collect();
        assert_eq!(left.len(), 1, "only a/ remains");
        std::fs::remove_dir_all(&dir).expect("clean");
    }
}
