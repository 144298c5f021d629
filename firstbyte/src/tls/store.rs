//! Parsed TLS objects, each file parsed once per config load.
//!
//! One [`ObjectStore`] lives for one load. Every `ssl_certificate`, `ssl_certificate_key`,
//! `ssl_client_certificate`, `ssl_stapling_file` and `ssl_session_ticket_key` goes through it:
//! the first reference reads and parses (via `certs`), later ones get the same `Arc`. Entries
//! are keyed by what determines their content — the [`Source`], plus the password file for a
//! key — and remember the metadata ([`FileStamp`]: device, inode, size, mtime, ctime) of every
//! file they were made from. On reload, [`ObjectStore::inherit`] offers the previous load's
//! entries (shared, not copied, until [`ObjectStore::finish`] ends the load): one whose files
//! all still have the same stamps is reused without reading; any change means a fresh parse.
//! Keys carry their hash, computed once per reference, since a reload looks each up in both
//! loads' maps. A key read with one password file is never handed to a server
//! with another, and an encrypted key is never inherited by the next load (nginx 1.27.4: a
//! reference to a decrypted key must not outlive the `ssl_password_file` context that opened
//! it). `data:` values are keyed by their content, so they are always inherited.
//! `ssl_object_cache_inheritable off` marks a load's store as not to be inherited from
//! ([`ObjectStore::set_inheritable`]): the load after it parses everything afresh.
//!
//! The counters ([`ObjectStore::counts`]) say how many objects a load parsed, reused from the
//! previous load, and shared between references; the runtime logs them at `info` once per load.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::sign::{CertifiedKey, SigningKey};
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, CertificateRevocationListDer};

use super::certs;
use super::error::{source_name, LoadReason, TlsError};
use crate::conf::model::{CertKey, Source};

/// Largest file read: 16 MiB is hundreds of times any real chain, CA bundle or OCSP
/// response, and keeps a wrong path (a disk image, `/dev/zero`) from exhausting memory.
const MAX_FILE_BYTES: u64 = 16 << 20;

pub use crate::files::FileStamp;

/// What an entry is keyed by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum EntryKey {
    Chain(Source),
    PrivateKey {
        source: Source,
        password_file: Option<PathBuf>,
    },
    Roots(PathBuf),
    Crls(PathBuf),
    Bytes(PathBuf),
}

/// A map key with its hash computed once: a reload looks each key up several times (this
/// load's cache, the previous load's, then an insert), and hashing a path walks its
/// components every time.
#[derive(Debug, Clone)]
struct Hashed<K> {
    hash: u64,
    key: K,
}

impl<K: Hash> Hashed<K> {
    fn new(key: K) -> Self {
        // Fixed keys are fine: the keys come from the configuration, not from peers.
        let mut h = std::hash::DefaultHasher::new();
        key.hash(&mut h);
        Self {
            hash: h.finish(),
            key,
        }
    }
}

impl<K> Hash for Hashed<K> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl<K: PartialEq> PartialEq for Hashed<K> {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.key == other.key
    }
}

impl<K: Eq> Eq for Hashed<K> {}

/// Hands a [`Hashed`] key's stored hash to the map unchanged.
#[derive(Default)]
struct PassHasher(u64);

impl Hasher for PassHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used by `Hashed`; anything else still hashes (FxHash's step).
        for b in bytes {
            self.0 =
                (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A map of [`Hashed`] keys.
type Map<K, V> = HashMap<Hashed<K>, V, BuildHasherDefault<PassHasher>>;

/// A parsed object.
#[derive(Clone)]
enum Object {
    Chain(Arc<Vec<CertificateDer<'static>>>),
    Key(Arc<dyn SigningKey>),
    /// A CA file: its anchors for rustls, and its certificates (`tls::chain`'s anchors).
    Roots(Arc<RootCertStore>, Arc<Vec<CertificateDer<'static>>>),
    Crls(Arc<Vec<CertificateRevocationListDer<'static>>>),
    Bytes(Arc<[u8]>),
}

/// A parsed object and the files it came from.
#[derive(Clone)]
struct Entry {
    object: Object,
    stamps: Stamps,
    /// False for encrypted keys: never handed to the next load.
    inheritable: bool,
}

/// A file an entry was made from, with its stamp then.
type Stamp = (PathBuf, FileStamp);

/// The files an entry was made from (shared, so handing an entry to the next load copies
/// nothing).
type Stamps = Arc<[Stamp]>;

/// The key of a certificate/key pair with its OCSP response.
type PairKey = (Source, Source, Option<PathBuf>, Option<PathBuf>);

/// What one load made, shared with the next load while that one is being built.
type Entries = Arc<Map<EntryKey, Entry>>;
/// Checked certificate/key pairs of one load, each with the chain object it was made from
/// (so the next load compares chains by identity, not byte by byte).
type Pairs = Arc<Map<PairKey, (Arc<CertifiedKey>, Arc<Vec<CertificateDer<'static>>>)>>;

/// Parsed certificates, keys, CA bundles and small files of one config load.
pub struct ObjectStore {
    entries: Entries,
    pairs: Pairs,
    /// The previous load's entries and pairs (during a reload, until [`ObjectStore::finish`]).
    /// A pair whose chain is equal and whose key is the very object this load got (reused) is
    /// taken whole, skipping the copy and the key/certificate check.
    previous: Option<(Entries, Pairs)>,
    parses: usize,
    reused: usize,
    shared: usize,
    inheritable: bool,
    provider: Arc<CryptoProvider>,
    /// `ssl_password_file`s this load read: each is read once per load, as nginx reads it
    /// once when it parses the directive (a FIFO yields its lines once).
    passwords: HashMap<PathBuf, (Passwords, FileStamp)>,
}

/// The passphrases of one `ssl_password_file`, one per line.
pub type Passwords = Arc<Vec<Vec<u8>>>;

/// What one load's store did, for the per-load log line and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreCounts {
    /// Objects read and parsed by this load.
    pub parsed: usize,
    /// Objects taken from the previous load because their files were unchanged.
    pub reused: usize,
    /// References answered from this load's own cache (a second `ssl_certificate` naming a file).
    pub shared: usize,
}

impl fmt::Display for StoreCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ssl object cache: {} parsed, {} reused from the previous load, {} shared references",
            self.parsed, self.reused, self.shared
        )
    }
}

impl fmt::Debug for ObjectStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectStore")
            .field("entries", &self.entries.len())
            .field(
                "previous",
                &self.previous.as_ref().map_or(0, |(e, _)| e.len()),
            )
            .field("parses", &self.parses)
            .finish_non_exhaustive()
    }
}

impl Default for ObjectStore {
    fn default() -> Self {
        Self::new()
    }
}

impl ObjectStore {
    /// An empty store (the first load).
    pub fn new() -> Self {
        Self {
            entries: Arc::default(),
            pairs: Arc::default(),
            previous: None,
            parses: 0,
            reused: 0,
            shared: 0,
            inheritable: true,
            provider: super::provider(),
            passwords: HashMap::new(),
        }
    }

    /// A store for a reload: entries `previous` used whose files are unchanged are reused.
    /// Entries the previous load did not use are let go at [`ObjectStore::finish`], so removed
    /// files are not kept; encrypted keys are never taken over, and nothing is when `previous`
    /// was marked `ssl_object_cache_inheritable off`. Nothing is copied here: the previous
    /// load's maps are shared until this load ends.
    pub fn inherit(previous: &ObjectStore) -> Self {
        // Sized like the previous load, so a reload of the same config never regrows them.
        let hasher = BuildHasherDefault::<PassHasher>::default();
        Self {
            entries: Arc::new(HashMap::with_capacity_and_hasher(
                previous.entries.len(),
                hasher.clone(),
            )),
            pairs: Arc::new(HashMap::with_capacity_and_hasher(
                previous.pairs.len(),
                hasher,
            )),
            previous: previous
                .inheritable
                .then(|| (previous.entries.clone(), previous.pairs.clone())),
            ..Self::new()
        }
    }

    /// Ends the load: lets go of the previous load's objects this load did not take.
    pub fn finish(&mut self) {
        self.previous = None;
    }

    /// `ssl_object_cache_inheritable on|off`: whether the next load may reuse this store's
    /// objects (nginx marks the load being made, so turning it off takes effect one reload later).
    pub fn set_inheritable(&mut self, on: bool) {
        self.inheritable = on;
    }

    /// Each certificate chain this load holds, by name, with its leaf's `notAfter` (seconds
    /// since the epoch), sorted by name; a leaf x509-parser cannot read is left out.
    pub fn certificate_expiry(&self) -> Vec<(String, i64)> {
        let mut out: Vec<(String, i64)> = self
            .entries
            .iter()
            .filter_map(|(k, e)| match (&k.key, &e.object) {
                (EntryKey::Chain(source), Object::Chain(chain)) => {
                    let leaf = chain.first()?;
                    let (_, c) = x509_parser::parse_x509_certificate(leaf.as_ref()).ok()?;
                    Some((source_name(source), c.validity().not_after.timestamp()))
                }
                _ => None,
            })
            .collect();
        out.sort();
        out
    }

    /// Parsed, reused and shared counts so far.
    pub fn counts(&self) -> StoreCounts {
        StoreCounts {
            parsed: self.parses,
            reused: self.reused,
            shared: self.shared,
        }
    }

    /// How many objects this store parsed (reads that hit the cache or were inherited don't count).
    pub fn parses(&self) -> usize {
        self.parses
    }

    /// The provider keys are loaded with.
    pub fn provider(&self) -> &Arc<CryptoProvider> {
        &self.provider
    }

    /// The cached entry for `key`, or a still-valid inherited one; on a miss, `key` back
    /// for the insert that follows the parse.
    fn lookup(&mut self, key: Hashed<EntryKey>) -> Result<Object, Hashed<EntryKey>> {
        if let Some(e) = self.entries.get(&key) {
            self.shared += 1;
            return Ok(e.object.clone());
        }
        let Some(e) = self
            .previous
            .as_ref()
            .and_then(|(entries, _)| entries.get(&key))
            .filter(|e| e.inheritable)
        else {
            return Err(key);
        };
        let unchanged = e
            .stamps
            .iter()
            .all(|(path, stamp)| FileStamp::current(path) == Some(*stamp));
        if !unchanged {
            return Err(key);
        }
        let e = e.clone();
        let object = e.object.clone();
        self.reused += 1;
        Arc::make_mut(&mut self.entries).insert(key, e);
        Ok(object)
    }

    fn insert(&mut self, key: Hashed<EntryKey>, object: Object, stamps: Stamps) {
        self.insert_with(key, object, stamps, true);
    }

    fn insert_with(
        &mut self,
        key: Hashed<EntryKey>,
        object: Object,
        stamps: Stamps,
        inheritable: bool,
    ) {
        self.parses += 1;
        Arc::make_mut(&mut self.entries).insert(
            key,
            Entry {
                object,
                stamps,
                inheritable,
            },
        );
    }

    /// A certificate chain (`ssl_certificate`).
    pub fn chain(
        &mut self,
        source: &Source,
    ) -> Result<Arc<Vec<CertificateDer<'static>>>, TlsError> {
        let key = match self.lookup(Hashed::new(EntryKey::Chain(source.clone()))) {
            Ok(Object::Chain(c)) => return Ok(c),
            Ok(_) => Hashed::new(EntryKey::Chain(source.clone())),
            Err(key) => key,
        };
        let fail = |reason| TlsError::Certificate {
            name: source_name(source),
            reason,
        };
        let (bytes, stamps) = read_source(source).map_err(|e| fail(LoadReason::Io(e)))?;
        let chain = Arc::new(certs::parse_chain(&bytes).map_err(fail)?);
        self.insert(key, Object::Chain(chain.clone()), stamps.into());
        Ok(chain)
    }

    /// A private key (`ssl_certificate_key`), decrypted with `password_file` if it is encrypted.
    pub fn key(
        &mut self,
        source: &Source,
        password_file: Option<&Path>,
    ) -> Result<Arc<dyn SigningKey>, TlsError> {
        let entry_key = || {
            Hashed::new(EntryKey::PrivateKey {
                source: source.clone(),
                password_file: password_file.map(Path::to_path_buf),
            })
        };
        let key = match self.lookup(entry_key()) {
            Ok(Object::Key(k)) => return Ok(k),
            Ok(_) => entry_key(),
            Err(key) => key,
        };
        let fail = |reason| TlsError::CertificateKey {
            name: source_name(source),
            reason,
        };
        let (bytes, mut stamps) = read_source(source).map_err(|e| fail(LoadReason::Io(e)))?;
        let passwords = match password_file {
            Some(path) if certs::needs_password(&bytes) => {
                let (list, stamp) = self.password_file(path)?;
                stamps.push((path.to_path_buf(), stamp));
                Some(list)
            }
            _ => None,
        };
        let encrypted = certs::needs_password(&bytes);
        let signing = certs::parse_key(
            &bytes,
            passwords.as_ref().map(|p| p.as_slice()),
            &self.provider,
        )
        .map_err(fail)?;
        self.insert_with(key, Object::Key(signing.clone()), stamps.into(), !encrypted);
        Ok(signing)
    }

    /// The passphrases of `path` (`ssl_password_file`), read on this load's first use only.
    pub fn passwords(&mut self, path: &Path) -> Result<Passwords, TlsError> {
        self.password_file(path).map(|(list, _)| list)
    }

    fn password_file(&mut self, path: &Path) -> Result<(Passwords, FileStamp), TlsError> {
        if let Some((list, stamp)) = self.passwords.get(path) {
            return Ok((list.clone(), *stamp));
        }
        let (text, stamp) = read_file(path).map_err(|error| TlsError::PasswordFile {
            name: path.display().to_string(),
            error,
        })?;
        let list = Arc::new(certs::parse_passwords(&text));
        self.passwords
            .insert(path.to_path_buf(), (list.clone(), stamp));
        Ok((list, stamp))
    }

    /// A CA bundle (`ssl_client_certificate`).
    pub fn roots(&mut self, path: &Path) -> Result<Arc<RootCertStore>, TlsError> {
        self.ca_file(path).map(|(roots, _)| roots)
    }

    /// A CA bundle as trust anchors and as the certificates themselves, from one read.
    #[allow(clippy::type_complexity)]
    pub fn ca_file(
        &mut self,
        path: &Path,
    ) -> Result<(Arc<RootCertStore>, Arc<Vec<CertificateDer<'static>>>), TlsError> {
        let key = match self.lookup(Hashed::new(EntryKey::Roots(path.to_path_buf()))) {
            Ok(Object::Roots(r, c)) => return Ok((r, c)),
            Ok(_) => Hashed::new(EntryKey::Roots(path.to_path_buf())),
            Err(key) => key,
        };
        let fail = |reason| TlsError::ClientCertificate {
            name: path.display().to_string(),
            reason,
        };
        let (bytes, stamp) = read_file(path).map_err(|e| fail(LoadReason::Io(e)))?;
        let roots = Arc::new(certs::parse_roots(&bytes).map_err(fail)?);
        let certs = Arc::new(certs::pem_certificates(&bytes).map_err(fail)?);
        self.insert(
            key,
            Object::Roots(roots.clone(), certs.clone()),
            Arc::new([(path.to_path_buf(), stamp)]),
        );
        Ok((roots, certs))
    }

    /// Certificate revocation lists (`proxy_ssl_crl`): every `X509 CRL` section of a PEM file.
    pub fn crls(
        &mut self,
        path: &Path,
    ) -> Result<Arc<Vec<CertificateRevocationListDer<'static>>>, TlsError> {
        let key = match self.lookup(Hashed::new(EntryKey::Crls(path.to_path_buf()))) {
            Ok(Object::Crls(c)) => return Ok(c),
            Ok(_) => Hashed::new(EntryKey::Crls(path.to_path_buf())),
            Err(key) => key,
        };
        let fail = |reason| TlsError::Crl {
            name: path.display().to_string(),
            reason,
        };
        let (bytes, stamp) = read_file(path).map_err(|e| fail(LoadReason::Io(e)))?;
        let mut crls = Vec::new();
        for c in CertificateRevocationListDer::pem_slice_iter(&bytes) {
            crls.push(c.map_err(|e| fail(LoadReason::Pem(e.to_string())))?);
        }
        if crls.is_empty() {
            return Err(fail(LoadReason::Empty));
        }
        super::chain::check_crls(&crls).map_err(|e| fail(LoadReason::BadCertificate(e)))?;
        let crls = Arc::new(crls);
        self.insert(
            key,
            Object::Crls(crls.clone()),
            Arc::new([(path.to_path_buf(), stamp)]),
        );
        Ok(crls)
    }

    /// A file's bytes, unparsed (`ssl_stapling_file`, `ssl_session_ticket_key`).
    pub fn bytes(&mut self, path: &Path) -> io::Result<Arc<[u8]>> {
        let key = match self.lookup(Hashed::new(EntryKey::Bytes(path.to_path_buf()))) {
            Ok(Object::Bytes(b)) => return Ok(b),
            Ok(_) => Hashed::new(EntryKey::Bytes(path.to_path_buf())),
            Err(key) => key,
        };
        let (bytes, stamp) = read_file(path)?;
        let bytes: Arc<[u8]> = bytes.into();
        self.insert(
            key,
            Object::Bytes(bytes.clone()),
            Arc::new([(path.to_path_buf(), stamp)]),
        );
        Ok(bytes)
    }

    /// A certificate, its key and optional OCSP response as one rustls `CertifiedKey`,
    /// checked to match; every server naming the same pair in this load shares it.
    pub fn certified_key(
        &mut self,
        pair: &CertKey,
        password_file: Option<&Path>,
        ocsp_file: Option<&Path>,
    ) -> Result<Arc<CertifiedKey>, TlsError> {
        let pk = Hashed::new((
            pair.cert.clone(),
            pair.key.clone(),
            password_file.map(Path::to_path_buf),
            ocsp_file.map(Path::to_path_buf),
        ));
        if let Some((ck, _)) = self.pairs.get(&pk) {
            self.shared += 1;
            return Ok(ck.clone());
        }
        let chain = self.chain(&pair.cert)?;
        let key = self.key(&pair.key, password_file)?;
        let ocsp = match ocsp_file {
            Some(path) => {
                let fail = |reason| TlsError::StaplingFile {
                    name: path.display().to_string(),
                    reason,
                };
                let der = self.bytes(path).map_err(|e| fail(LoadReason::Io(e)))?;
                if der.is_empty() {
                    return Err(fail(LoadReason::Empty));
                }
                Some(der)
            }
            None => None,
        };
        let previous = self.previous.as_ref().and_then(|(_, p)| p.get(&pk));
        if let Some((prev, prev_chain)) = previous {
            // Same key object (so inherited, never an encrypted one), same certificates and
            // OCSP bytes: the checked pair of the previous load is this load's pair.
            let same_key = std::ptr::addr_eq(Arc::as_ptr(&prev.key), Arc::as_ptr(&key));
            let same_chain = Arc::ptr_eq(prev_chain, &chain) || prev.cert == *chain;
            if same_key && same_chain && prev.ocsp.as_deref() == ocsp.as_deref() {
                let prev = prev.clone();
                Arc::make_mut(&mut self.pairs).insert(pk, (prev.clone(), chain));
                return Ok(prev);
            }
        }
        let mut ck = CertifiedKey::new(chain.as_ref().clone(), key);
        if !certs::keys_match(&ck) {
            return Err(TlsError::KeyMismatch {
                cert: source_name(&pair.cert),
                key: source_name(&pair.key),
            });
        }
        ck.ocsp = ocsp.map(|d| d.to_vec());
        let ck = Arc::new(ck);
        Arc::make_mut(&mut self.pairs).insert(pk, (ck.clone(), chain));
        Ok(ck)
    }
}

/// The bytes of a source and the stamps of the files read.
fn read_source(source: &Source) -> io::Result<(Vec<u8>, Vec<Stamp>)> {
    match source {
        Source::File(path) => {
            let (bytes, stamp) = read_file(path)?;
            Ok((bytes, vec![(path.clone(), stamp)]))
        }
        Source::Data(text) => Ok((text.as_bytes().to_vec(), Vec::new())),
    }
}

/// The bytes of a source and the stamp of its file (`None` for `data:`).
pub(super) fn read_source_stamped(source: &Source) -> io::Result<(Vec<u8>, Option<FileStamp>)> {
    match source {
        Source::File(path) => {
            let (bytes, stamp) = read_file(path)?;
            Ok((bytes, Some(stamp)))
        }
        Source::Data(text) => Ok((text.as_bytes().to_vec(), None)),
    }
}

/// Reads a whole file, with the stamp of the very file read (through the load's file source:
/// the disk, or the privileged broker's snapshot).
fn read_file(path: &Path) -> io::Result<(Vec<u8>, FileStamp)> {
    crate::files::read(path, MAX_FILE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{ecdsa_pem, encrypt_pkcs8};
    use super::*;
    use crate::conf::model::Pos;

    fn dir(tag: &str) -> crate::testdir::TempDir {
        crate::testdir::TempDir::new(&format!("store-{tag}"))
    }

    fn pos() -> Pos {
        Pos {
            file: Arc::new(PathBuf::from("/test.conf")),
            line: 1,
        }
    }

    fn pair(d: &Path, name: &str) -> CertKey {
        let (cert, key) = ecdsa_pem(&["localhost"]);
        std::fs::write(d.join(format!("{name}.crt")), cert).expect("write");
        std::fs::write(d.join(format!("{name}.key")), key).expect("write");
        CertKey {
            cert: Source::File(d.join(format!("{name}.crt"))),
            key: Source::File(d.join(format!("{name}.key"))),
            pos: pos(),
        }
    }

    #[test]
    fn each_file_parsed_once_per_load() {
        let d = dir("once");
        let p = pair(&d, "a");
        let mut store = ObjectStore::new();
        let a = store.certified_key(&p, None, None).expect("a");
        let c1 = store.chain(&p.cert).expect("chain");
        let k1 = store.key(&p.key, None).expect("key");
        let c2 = store.chain(&p.cert).expect("chain");
        let k2 = store.key(&p.key, None).expect("key");
        assert_eq!(store.parses(), 2);
        assert!(Arc::ptr_eq(&c1, &c2));
        assert!(Arc::ptr_eq(&k1, &k2));
        let b = store.certified_key(&p, None, None).expect("b");
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(store.parses(), 2);
    }

    #[test]
    fn reload_reuses_whole_pairs_until_a_file_changes() {
        let d = dir("pairs");
        let p = pair(&d, "a");
        let mut first = ObjectStore::new();
        let a1 = first.certified_key(&p, None, None).expect("a");
        let mut second = ObjectStore::inherit(&first);
        let a2 = second.certified_key(&p, None, None).expect("a again");
        assert!(Arc::ptr_eq(&a1, &a2), "unchanged pair taken whole");
        assert_eq!(second.counts().parsed, 0);
        // A new key (and certificate) under the same names: a new, checked pair.
        let _ = pair(&d, "a");
        let mut third = ObjectStore::inherit(&second);
        let a3 = third.certified_key(&p, None, None).expect("a changed");
        assert!(!Arc::ptr_eq(&a2, &a3));
        assert_eq!(third.counts().parsed, 2);
        // Certificate replaced by one of another key: the mismatch is still caught.
        let other = pair(&d, "b");
        std::fs::copy(d.join("b.crt"), d.join("a.crt.new")).expect("copy");
        std::fs::rename(d.join("a.crt.new"), d.join("a.crt")).expect("rename");
        let mut fourth = ObjectStore::inherit(&third);
        assert!(matches!(
            fourth.certified_key(&p, None, None),
            Err(TlsError::KeyMismatch { .. })
        ));
        drop(other);
    }

    #[test]
    fn inherit_reuses_unchanged_files_only() {
        let d = dir("inherit");
        let p = pair(&d, "a");
        let q = pair(&d, "b");
        let mut first = ObjectStore::new();
        let ka = first.key(&p.key, None).expect("a");
        let kb = first.key(&q.key, None).expect("b");
        first.chain(&p.cert).expect("chain");
        assert_eq!(first.parses(), 3);

        // Replace b's key (new inode and mtime); a is untouched.
        let (_, newkey) = ecdsa_pem(&["x"]);
        let tmp = d.join("b.key.new");
        std::fs::write(&tmp, newkey).expect("write");
        std::fs::rename(&tmp, d.join("b.key")).expect("rename");

        let mut second = ObjectStore::inherit(&first);
        let ka2 = second.key(&p.key, None).expect("a again");
        let kb2 = second.key(&q.key, None).expect("b again");
        second.chain(&p.cert).expect("chain again");
        assert!(Arc::ptr_eq(&ka, &ka2), "unchanged file reused");
        assert!(!Arc::ptr_eq(&kb, &kb2), "changed file re-read");
        assert_eq!(second.parses(), 1);

        // A third generation still sees the first one's entries through the second.
        let mut third = ObjectStore::inherit(&second);
        assert!(Arc::ptr_eq(&ka, &third.key(&p.key, None).expect("a")));
        assert_eq!(third.parses(), 0);
    }

    #[test]
    fn encrypted_key_not_shared_across_password_files() {
        let d = dir("pw");
        let (_, key) = ecdsa_pem(&["localhost"]);
        std::fs::write(d.join("enc.key"), encrypt_pkcs8(&key, b"s3cret")).expect("write");
        std::fs::write(d.join("good.pw"), "wrong\ns3cret\n").expect("write");
        std::fs::write(d.join("bad.pw"), "wrong\n").expect("write");
        let src = Source::File(d.join("enc.key"));
        let mut store = ObjectStore::new();
        assert!(store.key(&src, Some(&d.join("good.pw"))).is_ok());
        let e = store
            .key(&src, Some(&d.join("bad.pw")))
            .expect_err("bad pw");
        assert!(matches!(
            e,
            TlsError::CertificateKey {
                reason: LoadReason::BadPassword { tried: 1 },
                ..
            }
        ));
        let e = store.key(&src, None).expect_err("no pw");
        assert!(e.to_string().contains("no \"ssl_password_file\""));
        let e = store
            .key(&src, Some(&d.join("missing.pw")))
            .expect_err("missing pw");
        assert!(matches!(e, TlsError::PasswordFile { .. }));

        // Changing the password file invalidates the inherited key.
        let mut next = ObjectStore::inherit(&store);
        std::fs::write(d.join("good.pw"), "s3cret\n").expect("write");
        assert!(next.key(&src, Some(&d.join("good.pw"))).is_ok());
        assert_eq!(next.parses(), 1);

        // Even with nothing changed, an encrypted key is read again by the next load.
        let mut after = ObjectStore::inherit(&next);
        assert!(after.key(&src, Some(&d.join("good.pw"))).is_ok());
        assert_eq!(
            after.counts().parsed,
            1,
            "encrypted keys are never inherited"
        );
        assert_eq!(after.counts().reused, 0);
    }

    #[test]
    fn inheritable_off_and_counts() {
        let d = dir("inheritable");
        let p = pair(&d, "a");
        let mut first = ObjectStore::new();
        first.certified_key(&p, None, None).expect("pair");
        first.chain(&p.cert).expect("chain");
        assert_eq!(
            first.counts(),
            StoreCounts {
                parsed: 2,
                reused: 0,
                shared: 1
            }
        );
        let mut second = ObjectStore::inherit(&first);
        second.certified_key(&p, None, None).expect("pair");
        assert_eq!(second.counts().reused, 2);
        assert_eq!(second.counts().parsed, 0);
        assert!(second.counts().to_string().contains("0 parsed, 2 reused"));

        // `ssl_object_cache_inheritable off` marks the load it is in: the next parses all.
        second.set_inheritable(false);
        let mut third = ObjectStore::inherit(&second);
        third.certified_key(&p, None, None).expect("pair");
        assert_eq!(third.counts().parsed, 2);
        assert_eq!(third.counts().reused, 0);
    }

    #[test]
    fn data_keys_by_content() {
        let (cert, key) = ecdsa_pem(&["localhost"]);
        let (cert2, key2) = ecdsa_pem(&["other"]);
        let mut store = ObjectStore::new();
        let a = store.chain(&Source::Data(cert.clone())).expect("a");
        let b = store.chain(&Source::Data(cert)).expect("b");
        let c = store.chain(&Source::Data(cert2)).expect("c");
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        store.key(&Source::Data(key), None).expect("key");
        store.key(&Source::Data(key2), None).expect("key2");
        assert_eq!(store.counts().parsed, 4);
    }

    #[test]
    fn loading_errors_in_nginx_words() {
        let d = dir("errors");
        let mut store = ObjectStore::new();
        let missing = Source::File(d.join("missing.crt"));
        let e = store.chain(&missing).expect_err("missing");
        let want = format!(
            "cannot load certificate \"{}\": BIO_new_file() failed",
            d.join("missing.crt").display()
        );
        assert!(e.to_string().starts_with(&want), "{e}");

        std::fs::write(d.join("empty.key"), "").expect("write");
        let e = store
            .key(&Source::File(d.join("empty.key")), None)
            .expect_err("empty");
        assert!(
            e.to_string().starts_with("cannot load certificate key \""),
            "{e}"
        );
        assert!(matches!(
            e,
            TlsError::CertificateKey {
                reason: LoadReason::Empty,
                ..
            }
        ));

        // Certificate of one pair with the key of another.
        let a = pair(&d, "a");
        let b = pair(&d, "b");
        let mixed = CertKey {
            cert: a.cert.clone(),
            key: b.key.clone(),
            pos: pos(),
        };
        let e = store
            .certified_key(&mixed, None, None)
            .expect_err("mismatch");
        assert!(matches!(e, TlsError::KeyMismatch { .. }));
        assert!(e.to_string().contains("key values mismatch"), "{e}");

        let e = store.roots(&d.join("nope.pem")).expect_err("roots");
        assert!(
            e.to_string()
                .starts_with("SSL_CTX_load_verify_locations(\""),
            "{e}"
        );
    }

    #[test]
    fn inline_data_sources() {
        let (cert, key) = ecdsa_pem(&["localhost"]);
        let p = CertKey {
            cert: Source::Data(cert),
            key: Source::Data(key),
            pos: pos(),
        };
        let mut store = ObjectStore::new();
        store.certified_key(&p, None, None).expect("pair");
        let mut next = ObjectStore::inherit(&store);
        next.certified_key(&p, None, None).expect("pair");
        assert_eq!(next.parses(), 0, "same data, same objects");
    }

    #[test]
    fn ocsp_is_attached() {
        let d = dir("ocsp");
        let p = pair(&d, "a");
        std::fs::write(d.join("ocsp.der"), [0x30, 0x03, 0x0a, 0x01, 0x00]).expect("write");
        let mut store = ObjectStore::new();
        let ck = store
            .certified_key(&p, None, Some(&d.join("ocsp.der")))
            .expect("pair");
        assert_eq!(
            ck.ocsp.as_deref(),
            Some(&[0x30, 0x03, 0x0a, 0x01, 0x00][..])
        );
        let e = store
            .certified_key(&p, None, Some(&d.join("none.der")))
            .expect_err("missing ocsp");
        assert!(matches!(e, TlsError::StaplingFile { .. }));
    }
}
