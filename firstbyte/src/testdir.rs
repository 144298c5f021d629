//! Scratch directories for unit tests: unique to one test (tests run as threads of one
//! process, and a process id comes round again), removed when the test ends.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A directory under the system temp dir, removed (with what it holds) when dropped.
#[derive(Debug)]
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    /// A new empty directory whose name carries `tag`, the process id and a counter.
    pub(crate) fn new(tag: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("fb-test-{tag}-{}-{n}", std::process::id()));
        // Left by an earlier process with this id that was killed before it could clean up.
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create a scratch dir");
        TempDir(p)
    }
}

impl std::ops::Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_and_removed_when_dropped() {
        let a = TempDir::new("t");
        let b = TempDir::new("t");
        assert_ne!(&*a, &*b);
        std::fs::write(a.join("f"), b"x").unwrap();
        let p = a.to_path_buf();
        drop(a);
        assert!(!p.exists(), "left behind");
        assert!(b.is_dir());
    }
}
