//! Request header names as nginx validates them (`ignore_invalid_headers`,
//! `underscores_in_headers`).

use http::HeaderMap;

use crate::http::conn::Conn;

/// Whether nginx takes a header name as valid: letters, digits and `-`, and `_` with
/// `underscores_in_headers on`. Anything else hyper let through (`.`, `~`, `!`, ...) is invalid.
pub fn valid_header_name(name: &str, underscores: bool) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || (b == b'_' && underscores))
}

/// `ignore_invalid_headers on` (nginx's default): invalid headers are dropped before anything
/// reads them, so `X_Real_IP` never reaches an upstream beside `X-Real-IP` (applications
/// that map both to `HTTP_X_REAL_IP` would take either).
pub(super) fn drop_invalid_headers(h: &mut HeaderMap, underscores: bool, conn: &Conn) {
    if h.keys().all(|k| valid_header_name(k.as_str(), underscores)) {
        return;
    }
    let old = std::mem::take(h);
    let mut name = None;
    for (k, v) in old {
        // `None` continues the previous name's values.
        if let Some(k) = k {
            name = Some(k);
        }
        let Some(k) = &name else { continue };
        if valid_header_name(k.as_str(), underscores) {
            h.append(k.clone(), v);
        } else {
            crate::fblog!(
                Info,
                "client sent invalid header line: \"{}\", client: {}",
                k.as_str(),
                conn.facts
                    .peer
                    .map(|p| p.ip().to_string())
                    .unwrap_or_default()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_names_as_nginx_validates_them() {
        assert!(valid_header_name("x-real-ip", false));
        assert!(!valid_header_name("x_real_ip", false));
        assert!(valid_header_name("x_real_ip", true));
        assert!(!valid_header_name("x.real", true));
        assert!(!valid_header_name("x~y", true));
        assert!(!valid_header_name("", true));
    }
}
