//! Request field names as `HeaderName`s without building one per field: a browser sends the
//! same dozen names on every request, and `HeaderName::from_lowercase` validates a name not
//! in the `http` crate's standard list and copies it into an allocation of its own each time
//! (seven of Chromium's thirteen request fields: `sec-ch-ua*`, `sec-fetch-*`, `priority`).
//!
//! Each worker thread keeps the names it has built in a small table keyed by a hash of the
//! bytes ([`lowercase`]); a name found there is cloned (a reference count, no copy). A name
//! that collides with another replaces it. Names past [`MAX_LEN`] are not kept, so a client
//! cannot make the table hold much memory.

use std::cell::RefCell;

use http::header::HeaderName;

/// Table slots per worker thread (a power of two).
const SLOTS: usize = 256;

/// The longest name kept (longer ones are built each time).
pub const MAX_LEN: usize = 64;

thread_local! {
    static NAMES: RefCell<Vec<Option<HeaderName>>> = RefCell::new(vec![None; SLOTS]);
}

/// `name` as a `HeaderName`, if it is one as HTTP/2 and HTTP/3 send names: lower-case token
/// characters only (None otherwise, as `HeaderName::from_lowercase`).
pub fn lowercase(name: &[u8]) -> Option<HeaderName> {
    if name.is_empty() || name.len() > MAX_LEN {
        return HeaderName::from_lowercase(name).ok();
    }
    let i = slot(name);
    NAMES.with(|t| {
        let Ok(mut t) = t.try_borrow_mut() else {
            return HeaderName::from_lowercase(name).ok();
        };
        if let Some(n) = &t[i] {
            if n.as_str().as_bytes() == name {
                return Some(n.clone());
            }
        }
        let n = HeaderName::from_lowercase(name).ok()?;
        t[i] = Some(n.clone());
        Some(n)
    })
}

/// The table slot of a name: the top byte of its FNV-1a hash (which gives Chromium's
/// request names a slot each, see the tests).
fn slot(name: &[u8]) -> usize {
    let mut h: u32 = 0x811c_9dc5;
    for &b in name {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    (h >> 24) as usize % SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_what_from_lowercase_gives() {
        for n in [
            &b"sec-fetch-site"[..],
            b"sec-fetch-mode",
            b"accept",
            b"x-a",
            b"cookie",
        ] {
            // Built, then found: both equal to the name built directly.
            for _ in 0..2 {
                assert_eq!(
                    lowercase(n),
                    Some(HeaderName::from_lowercase(n).unwrap()),
                    "{}",
                    String::from_utf8_lossy(n)
                );
            }
        }
        let long = vec![b'a'; MAX_LEN + 1];
        assert_eq!(lowercase(&long).unwrap().as_str().len(), MAX_LEN + 1);
        // What from_lowercase refuses is refused, cached or not.
        for bad in [&b"Accept"[..], b"", b"a b", b"a:b", b"\xff"] {
            assert_eq!(lowercase(bad), None);
            assert_eq!(lowercase(bad), None);
        }
    }

    #[test]
    fn a_colliding_name_replaces_the_other_and_both_stay_right() {
        // Two names in one slot (found by search, so the test does not depend on luck).
        let first = b"x-0".to_vec();
        let other = (0..100_000u32)
            .map(|i| format!("x-{i}").into_bytes())
            .find(|n| n != &first && slot(n) == slot(&first))
            .expect("a collision among 100,000 names");
        for _ in 0..3 {
            assert_eq!(lowercase(&first).unwrap().as_str().as_bytes(), &first[..]);
            assert_eq!(lowercase(&other).unwrap().as_str().as_bytes(), &other[..]);
        }
    }

    #[test]
    fn chromiums_names_have_slots_of_their_own() {
        let names = [
            "sec-ch-ua",
            "sec-ch-ua-mobile",
            "user-agent",
            "sec-ch-ua-platform",
            "accept",
            "sec-fetch-site",
            "sec-fetch-mode",
            "sec-fetch-dest",
            "referer",
            "accept-encoding",
            "accept-language",
            "cookie",
            "priority",
            "host",
        ];
        let mut slots: Vec<usize> = names.iter().map(|n| slot(n.as_bytes())).collect();
        slots.sort_unstable();
        slots.dedup();
        assert_eq!(slots.len(), names.len());
    }
}
