//! The CGI response header a FastCGI application writes at the start of its stdout: header
//! lines up to an empty line (CRLF or LF), `Status: NNN [reason]` setting the status, and a
//! `Location:` without `Status:` meaning 302, as nginx's `ngx_http_fastcgi_process_header`.

use http::{HeaderMap, HeaderName, HeaderValue};

/// The parsed header.
#[derive(Debug)]
pub struct Head {
    /// The status to answer.
    pub status: u16,
    /// The header fields, `Status` included (the caller hides it).
    pub headers: HeaderMap,
    /// Bytes of `buf` the header took (the body starts there).
    pub len: usize,
}

/// Why the header is not usable; the text is nginx's log message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    /// A line that is not `Name: value`.
    #[error("upstream sent invalid header: \"{0}\"")]
    Invalid(String),
    /// `Status:` without three digits.
    #[error("upstream sent invalid status \"{0}\"")]
    Status(String),
}

/// Parses the header at the start of `buf`. `Ok(None)`: the empty line has not arrived yet.
pub fn parse(buf: &[u8]) -> Result<Option<Head>, HeadError> {
    let mut headers = HeaderMap::new();
    let mut pos = 0;
    loop {
        let Some(nl) = buf[pos..].iter().position(|&b| b == b'\n') else {
            return Ok(None);
        };
        let mut line = &buf[pos..pos + nl];
        pos += nl + 1;
        if let Some(l) = line.strip_suffix(b"\r") {
            line = l;
        }
        if line.is_empty() {
            break;
        }
        let bad = || HeadError::Invalid(String::from_utf8_lossy(line).into_owned());
        let colon = line.iter().position(|&b| b == b':').ok_or_else(bad)?;
        let name = HeaderName::from_bytes(&line[..colon]).map_err(|_| bad())?;
        let value = trim(&line[colon + 1..]);
        let value = HeaderValue::from_bytes(value).map_err(|_| bad())?;
        headers.append(name, value);
    }
    let status = match headers.get("status") {
        Some(v) => {
            let s = v.as_bytes();
            let digits = s.get(..3).filter(|d| d.iter().all(u8::is_ascii_digit));
            let n = digits
                .and_then(|d| std::str::from_utf8(d).ok())
                .and_then(|d| d.parse::<u16>().ok())
                .filter(|n| *n >= 100)
                .ok_or_else(|| HeadError::Status(String::from_utf8_lossy(s).into_owned()))?;
            n
        }
        None if headers.contains_key(http::header::LOCATION) => 302,
        None => 200,
    };
    Ok(Some(Head {
        status,
        headers,
        len: pos,
    }))
}

fn trim(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_location_and_default() {
        let h = parse(b"Status: 404 Not Found\r\nContent-type: text/html\r\n\r\nbody")
            .expect("ok")
            .expect("whole");
        assert_eq!(h.status, 404);
        assert_eq!(h.headers["content-type"], "text/html");
        assert_eq!(h.len, 50);
        assert_eq!(
            &b"Status: 404 Not Found\r\nContent-type: text/html\r\n\r\nbody"[h.len..],
            b"body"
        );
        let h = parse(b"Location: /next\n\n").expect("ok").expect("whole");
        assert_eq!(h.status, 302);
        let h = parse(b"Location: /x\r\nStatus: 301\r\n\r\n")
            .expect("ok")
            .expect("whole");
        assert_eq!(h.status, 301);
        let h = parse(b"X-A: 1\r\nX-A: 2\r\n\r\n")
            .expect("ok")
            .expect("whole");
        assert_eq!(
            (h.status, h.headers.get_all("x-a").iter().count()),
            (200, 2)
        );
    }

    #[test]
    fn incomplete_and_invalid() {
        assert!(parse(b"Content-Type: text/html\r\n").expect("ok").is_none());
        assert!(parse(b"").expect("ok").is_none());
        assert_eq!(
            parse(b"no colon here\r\n\r\n").unwrap_err(),
            HeadError::Invalid("no colon here".into())
        );
        assert_eq!(
            parse(b"Status: abc\r\n\r\n").unwrap_err(),
            HeadError::Status("abc".into())
        );
        assert!(parse(b"Status: 099\r\n\r\n").is_err());
        assert!(parse(b"Bad Name: x\r\n\r\n").is_err());
    }
}
