//! nginx-style built-in response pages (error pages, redirects) and status lines.

use bytes::Bytes;

/// Reason phrase for a status code (nginx's wording where nginx has its own).
pub fn reason(code: u16) -> &'static str {
    match code {
        494 => "Request Header Or Cookie Too Large",
        495 => "SSL Certificate Error",
        496 => "SSL Certificate Required",
        497 => "HTTP Request Sent to HTTPS Port",
        499 => "Client Closed Request",
        _ => http::StatusCode::from_u16(code)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("Unknown"),
    }
}

/// The HTML page nginx sends for a status without a body of its own.
pub fn status_page(code: u16) -> Bytes {
    Bytes::from(format!(
        "<html>\r\n<head><title>{code} {r}</title></head>\r\n<body>\r\n<center><h1>{code} {r}</h1></center>\r\n<hr><center>firstbyte</center>\r\n</body>\r\n</html>\r\n",
        r = reason(code)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_name_the_status() {
        let p = status_page(404);
        let s = std::str::from_utf8(&p).unwrap();
        assert!(s.contains("<title>404 Not Found</title>"));
        assert!(s.contains("<center>firstbyte</center>"));
        assert_eq!(reason(497), "HTTP Request Sent to HTTPS Port");
    }
}
