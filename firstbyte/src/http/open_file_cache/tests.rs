use super::*;
use crate::http::open_file::tests::TempDir;
use std::os::unix::fs::PermissionsExt;

const OFF: DisableSymlinks = DisableSymlinks::Off;

fn nginx_lookup(valid: u64, min_uses: u32, errors: bool) -> Lookup {
    Lookup {
        symlinks: SymlinkCheck::from(OFF),
        valid: Duration::from_secs(valid),
        min_uses,
        errors,
        received: None,
    }
}

/// Rewrites `p` in place (same inode), as `open(F, '>', ...)` does.
fn rewrite(p: &Path, data: &[u8]) {
    std::fs::write(p, data).unwrap();
}

#[test]
fn revalidating_reuses_an_unchanged_file_and_sees_every_change_at_once() {
    let d = TempDir::new("reval");
    let p = d.file("f.txt", b"one");
    let c = OpenFileCache::revalidating();
    let l = Lookup::defaults(OFF);
    let t = Instant::now();
    let a = c.open_at(&p, &l, t).unwrap();
    let b = c.open_at(&p, &l, t).unwrap();
    assert!(
        Arc::ptr_eq(&a, &b),
        "unchanged: the same descriptor and headers"
    );
    // Rewritten in place at the same instant: the new length at once.
    rewrite(&p, b"second version");
    let e = c.open_at(&p, &l, t).unwrap();
    assert_eq!(e.meta.len, 14);
    assert!(!Arc::ptr_eq(&a, &e));
    // Replaced by rename: the new inode.
    let tmp = d.file("f.new", b"third, longer version");
    std::fs::rename(&tmp, &p).unwrap();
    assert_eq!(c.open_at(&p, &l, t).unwrap().meta.len, 21);
    // A mode change moves ctime: opened again, and refused like a fresh open would be
    // (unless this runs as root, who may read anything).
    let before = c.open_at(&p, &l, t).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o000)).unwrap();
    let after = c.open_at(&p, &l, t);
    let root = unsafe { libc::geteuid() } == 0;
    match after {
        Ok(f) => {
            assert!(root, "a mode-000 file was served from the old descriptor");
            assert!(!Arc::ptr_eq(&before, &f));
        }
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EACCES)),
    }
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    // Failures are never kept: a file created after a 404 is found at once.
    let q = d.0.join("later.txt");
    assert!(c.open_at(&q, &l, t).is_err());
    std::fs::write(&q, b"now").unwrap();
    assert_eq!(c.open_at(&q, &l, t).unwrap().meta.len, 3);
    // Deleted: gone at once.
    std::fs::remove_file(&q).unwrap();
    assert!(c.open_at(&q, &l, t).is_err());
}

#[test]
fn revalidating_walks_the_path_each_time_when_symlinks_are_checked() {
    let d = TempDir::new("reval-sym");
    let p = d.file("f.txt", b"one");
    let c = OpenFileCache::revalidating();
    let on = Lookup::defaults(DisableSymlinks::On);
    let t = Instant::now();
    c.open_at(&p, &on, t).unwrap();
    assert!(c.is_empty(), "nothing kept under disable_symlinks on");
    // The file becomes a symlink: refused at once.
    let real = d.file("real.txt", b"real");
    std::fs::remove_file(&p).unwrap();
    std::os::unix::fs::symlink(&real, &p).unwrap();
    let e = c.open_at(&p, &on, t).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
    assert_eq!(
        c.open_at(&p, &Lookup::defaults(OFF), t).unwrap().meta.len,
        4
    );
}

#[test]
fn revalidating_is_bounded_and_drops_idle_entries() {
    let d = TempDir::new("reval-lru");
    let c = OpenFileCache::revalidating();
    let l = Lookup::defaults(OFF);
    let t = Instant::now();
    for i in 0..DEFAULT_MAX_ENTRIES + 20 {
        let p = d.file(&format!("f{i}"), b"x");
        c.open_at(&p, &l, t).unwrap();
    }
    assert_eq!(c.len(), DEFAULT_MAX_ENTRIES);
    let p = d.file("late", b"x");
    c.open_at(&p, &l, t + DEFAULT_INACTIVE + Duration::from_secs(1))
        .unwrap();
    assert_eq!(c.len(), 1, "idle entries dropped");
}

#[test]
fn nginx_trusts_metadata_for_valid_then_rechecks_the_inode() {
    let d = TempDir::new("ngx");
    let p = d.file("f.txt", b"one");
    let c = OpenFileCache::nginx(10, Duration::from_secs(60));
    let l = nginx_lookup(60, 1, false);
    let t0 = Instant::now();
    let a = c.open_at(&p, &l, t0).unwrap();
    rewrite(&p, b"second version");
    let b = c.open_at(&p, &l, t0 + Duration::from_secs(30)).unwrap();
    assert!(Arc::ptr_eq(&a, &b), "within valid: the old entry");
    assert_eq!(b.meta.len, 3);
    // Past valid, same inode: the same descriptor with the new metadata.
    let e = c.open_at(&p, &l, t0 + Duration::from_secs(61)).unwrap();
    assert_eq!(e.meta.len, 14);
    assert!(Arc::ptr_eq(&a.file, &e.file));
    // Replaced: within valid still the old one, then the new file.
    let tmp = d.file("f.new", b"third, longer version");
    std::fs::rename(&tmp, &p).unwrap();
    let t1 = t0 + Duration::from_secs(62);
    assert_eq!(c.open_at(&p, &l, t1).unwrap().meta.len, 14);
    let f = c.open_at(&p, &l, t1 + Duration::from_secs(61)).unwrap();
    assert_eq!(f.meta.len, 21);
    assert!(!Arc::ptr_eq(&a.file, &f.file));
    // Removed past valid: the error, and the entry is gone (errors off).
    std::fs::remove_file(&p).unwrap();
    assert!(c.open_at(&p, &l, t1 + Duration::from_secs(200)).is_err());
    assert!(c.is_empty());
}

#[test]
fn nginx_min_uses_opens_until_the_path_is_used_enough() {
    let d = TempDir::new("ngx-min");
    let p = d.file("f.txt", b"one");
    let c = OpenFileCache::nginx(10, Duration::from_secs(60));
    let l = nginx_lookup(60, 3, false);
    let t = Instant::now();
    assert_eq!(c.open_at(&p, &l, t).unwrap().meta.len, 3);
    rewrite(&p, b"two!");
    assert_eq!(c.open_at(&p, &l, t).unwrap().meta.len, 4, "use 2: opened");
    rewrite(&p, b"three");
    assert_eq!(
        c.open_at(&p, &l, t).unwrap().meta.len,
        5,
        "use 3: opened, kept"
    );
    rewrite(&p, b"four, longer");
    assert_eq!(
        c.open_at(&p, &l, t).unwrap().meta.len,
        5,
        "use 4: the kept one"
    );
}

#[test]
fn nginx_errors_on_keeps_failures_for_valid() {
    let d = TempDir::new("ngx-err");
    let p = d.0.join("later.txt");
    let t = Instant::now();
    let c = OpenFileCache::nginx(10, Duration::from_secs(60));
    let on = nginx_lookup(60, 1, true);
    assert!(c.open_at(&p, &on, t).is_err());
    std::fs::write(&p, b"now").unwrap();
    let e = c.open_at(&p, &on, t + Duration::from_secs(59)).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    assert_eq!(
        c.open_at(&p, &on, t + Duration::from_secs(60))
            .unwrap()
            .meta
            .len,
        3
    );
    // errors off: a failure leaves no entry.
    let c = OpenFileCache::nginx(10, Duration::from_secs(60));
    let off = nginx_lookup(60, 1, false);
    let q = d.0.join("later2.txt");
    assert!(c.open_at(&q, &off, t).is_err());
    assert!(c.is_empty());
    std::fs::write(&q, b"now").unwrap();
    assert_eq!(c.open_at(&q, &off, t).unwrap().meta.len, 3);
}

#[test]
fn nginx_drops_the_least_recently_used_and_the_inactive() {
    let d = TempDir::new("ngx-lru");
    let c = OpenFileCache::nginx(2, Duration::from_secs(20));
    let l = nginx_lookup(60, 1, false);
    let t = Instant::now();
    let (a, b, x) = (d.file("a", b"a"), d.file("b", b"b"), d.file("c", b"c"));
    let fa = c.open_at(&a, &l, t).unwrap();
    let fb = c.open_at(&b, &l, t).unwrap();
    c.open_at(&a, &l, t).unwrap();
    c.open_at(&x, &l, t).unwrap();
    assert_eq!(c.len(), 2);
    // `b` was the least recently used: dropped, so opened anew; `a` is still the same.
    assert!(Arc::ptr_eq(&fa, &c.open_at(&a, &l, t).unwrap()));
    assert!(!Arc::ptr_eq(&fb, &c.open_at(&b, &l, t).unwrap()));
    // Unused for longer than inactive (within valid): dropped, the file is opened again.
    let later = t + Duration::from_secs(21);
    assert!(!Arc::ptr_eq(&fa, &c.open_at(&a, &l, later).unwrap()));
    assert_eq!(c.len(), 1);
}

#[test]
fn policies_are_kept_apart() {
    let d = TempDir::new("ngx-pol");
    let p = d.file("f.txt", b"x");
    let link = d.0.join("link.txt");
    std::os::unix::fs::symlink(&p, &link).unwrap();
    let c = OpenFileCache::nginx(10, Duration::from_secs(60));
    let t = Instant::now();
    assert!(c.open_at(&link, &nginx_lookup(60, 1, true), t).is_ok());
    let on = Lookup {
        symlinks: DisableSymlinks::On.into(),
        ..nginx_lookup(60, 1, true)
    };
    let e = c.open_at(&link, &on, t).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
    assert!(OpenFileCache::disabled().is_empty());
}

#[test]
fn nginx_rechecks_an_entry_checked_from_another_prefix() {
    let d = TempDir::new("ngx-from");
    std::fs::create_dir(d.0.join("real")).unwrap();
    d.file("real/f.txt", b"x");
    std::os::unix::fs::symlink(d.0.join("real"), d.0.join("rootlink")).unwrap();
    let p = d.0.join("rootlink/f.txt");
    let c = OpenFileCache::nginx(10, Duration::from_secs(60));
    let t = Instant::now();
    let root = d.0.join("rootlink");
    let bytes = p.as_os_str().as_bytes();
    let from = SymlinkCheck::for_path(DisableSymlinks::On, root.to_str(), bytes);
    let with = |symlinks| Lookup {
        symlinks,
        ..nginx_lookup(60, 1, true)
    };
    let whole = with(DisableSymlinks::On.into());
    for _ in 0..2 {
        assert!(c.open_at(&p, &with(from), t).is_ok(), "from= the root");
        let e = c.open_at(&p, &whole, t).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOTDIR), "the whole path");
    }
}

#[test]
fn lru_order_and_last_use_follow_repeated_hits() {
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let inactive = Duration::from_secs(10);
    let mut lru = Lru::default();
    lru.put(b"/a", 0, Err(libc::ENOENT), 0, true, at(0), 8);
    lru.put(b"/b", 0, Err(libc::ENOENT), 0, true, at(1), 8);
    // /b is the most recent: hits keep its place and move its last use.
    assert_eq!(lru.touch(b"/b", 0, at(2)).map(|e| e.uses), Some(2));
    assert_eq!(lru.touch(b"/b", 0, at(3)).map(|e| e.uses), Some(3));
    // /a moves after /b, then is hit again as the most recent.
    assert!(lru.touch(b"/a", 0, at(4)).is_some());
    assert_eq!(lru.touch(b"/a", 0, at(9)).map(|e| e.uses), Some(3));
    assert!(lru.touch(b"/c", 0, at(9)).is_none());
    // At 14 /b (last used at 3) is past `inactive`; /a (last used at 9, not 4) is not.
    lru.expire(at(14), inactive);
    assert_eq!(lru.len(), 1);
    assert!(lru.map.contains_key(&b"/a"[..]));
    lru.expire(at(19), inactive);
    assert_eq!(lru.len(), 1);
    lru.expire(at(20), inactive);
    assert_eq!(lru.len(), 0);
    assert!(lru.map.is_empty());
    // Eviction at `max` drops the least recently used: /d, hit last, survives /e's arrival.
    lru.put(b"/d", 0, Err(libc::ENOENT), 0, true, at(21), 2);
    lru.put(b"/f", 0, Err(libc::ENOENT), 0, true, at(21), 2);
    assert!(lru.touch(b"/d", 0, at(22)).is_some());
    assert!(lru.touch(b"/d", 0, at(23)).is_some());
    lru.put(b"/e", 0, Err(libc::ENOENT), 0, true, at(24), 2);
    assert!(lru.map.contains_key(&b"/d"[..]));
    assert!(lru.map.contains_key(&b"/e"[..]));
    assert!(!lru.map.contains_key(&b"/f"[..]));
}

/// The default mode reuses a check made after the request arrived (requests multiplexed or
/// pipelined in one read share one `stat`), and checks again for a request that arrived
/// after it: a file rewritten before the request was sent is always seen.
#[test]
fn a_check_made_after_the_request_arrived_serves_it() {
    let d = TempDir::new("ofc-received");
    let p = d.file("f.txt", b"abc");
    let c = OpenFileCache::revalidating();
    let with = |received| Lookup {
        received,
        ..Lookup::defaults(OFF)
    };
    let arrived = Instant::now();
    let first = c.open_at(&p, &with(Some(arrived)), Instant::now()).unwrap();
    assert_eq!(first.meta.len, 3);
    // Rewritten after the check: a request that arrived before the check began is answered
    // from it (its client cannot have seen the rewrite), with no `stat`.
    rewrite(&p, b"abcdef");
    let same = c.open_at(&p, &with(Some(arrived)), Instant::now()).unwrap();
    assert!(Arc::ptr_eq(&first, &same));
    // A request that arrived after the rewrite is checked again and gets the new file; so
    // does one of unknown arrival.
    let later = Instant::now();
    let fresh = c.open_at(&p, &with(Some(later)), Instant::now()).unwrap();
    assert_eq!(fresh.meta.len, 6);
    rewrite(&p, b"abcdefghi");
    assert_eq!(
        c.open_at(&p, &with(None), Instant::now()).unwrap().meta.len,
        9
    );
    // An unchanged file found by a check moves the check's time on: a request that arrived
    // before that check reuses it.
    let arrived = Instant::now();
    let checked = c.open_at(&p, &with(Some(arrived)), Instant::now()).unwrap();
    rewrite(&p, b"abcdefghijkl");
    let reused = c.open_at(&p, &with(Some(arrived)), Instant::now()).unwrap();
    assert!(Arc::ptr_eq(&checked, &reused));
}
