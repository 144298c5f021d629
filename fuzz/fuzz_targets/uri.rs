//! Request targets → `$uri` → `Location`: `split_target`, `normalize_path` (percent-decoding,
//! slash merging, `.`/`..`), `encode_path`. Besides never panicking:
//! - the query is exactly the text after the first `?`, and the path has none;
//! - a normalised path starts with `/`, has no empty, `.` or `..` segment (no `//`, `/./`,
//!   `/../`, nor a trailing `/.` or `/..`), no NUL, and so cannot leave a root it is joined to;
//! - a path that does not start with `/` (and is not empty) is refused;
//! - `encode_path` gives a header-safe ASCII string that normalises back to the same `$uri`.

#![no_main]

use std::path::{Component, Path};

use firstbyte::fuzzing::{encode_path, normalize_path, split_target, HeaderValue, UriError};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(target) = std::str::from_utf8(data) else {
        return;
    };
    let (path, query) = split_target(target);
    assert!(!path.contains('?'));
    match query {
        Some(q) => assert_eq!(format!("{path}?{q}"), target),
        None => assert_eq!(path, target),
    }
    let uri = match normalize_path(path) {
        Ok(uri) => uri,
        Err(e) => {
            if !path.is_empty() && !path.starts_with('/') {
                assert_eq!(e, UriError::NotAbsolute);
            }
            return;
        }
    };
    assert!(
        path.is_empty() || path.starts_with('/'),
        "{path:?} accepted"
    );
    assert!(uri.starts_with('/'), "{path:?} -> {uri:?}");
    assert!(!uri.contains('\0'));
    // Every segment but a trailing empty one is a real name.
    let body = uri.strip_suffix('/').unwrap_or(&uri);
    for seg in body.split('/').skip(1) {
        assert!(!matches!(seg, "" | "." | ".."), "{path:?} -> {uri:?}");
    }
    // Joined to a root, nothing climbs out of it.
    let root = Path::new("/srv/www");
    let file = root.join(uri.trim_start_matches('/'));
    assert!(file.starts_with(root), "{path:?} -> {file:?}");
    assert!(
        file.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_))),
        "{path:?} -> {file:?}"
    );
    // Normalising is idempotent once escapes are out of the way, and a Location round-trips.
    let encoded = encode_path(&uri);
    assert!(
        encoded.bytes().all(|b| b.is_ascii_graphic()),
        "{uri:?} -> {encoded:?}"
    );
    assert!(HeaderValue::from_str(&encoded).is_ok());
    assert_eq!(normalize_path(&encoded).as_deref(), Ok(uri.as_str()));
    if !uri.contains('%') {
        assert_eq!(normalize_path(&uri).as_deref(), Ok(uri.as_str()));
    }
});
