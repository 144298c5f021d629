//! nginx-style built-in response pages (error pages, redirects) and status lines.

use bytes::Bytes;

/// Reason phrase for a status code in a page's title (nginx's wording where nginx has its own).
pub fn reason(code: u16) -> &'static str {
    match code {
        401 => "Authorization Required",
        405 => "Not Allowed",
        408 => "Request Time-out",
        413 => "Request Entity Too Large",
        414 => "Request-URI Too Large",
        416 => "Requested Range Not Satisfiable",
        503 => "Service Temporarily Unavailable",
        504 => "Gateway Time-out",
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

/// nginx's reason phrase in an HTTP/1.x status line where it differs from the standard one
/// (`HTTP/1.1 405 Not Allowed`, `302 Moved Temporarily`); None: the standard phrase.
pub fn status_line_reason(code: u16) -> Option<&'static str> {
    Some(match code {
        302 => "Moved Temporarily",
        405 | 408 | 413 | 414 | 416 | 503 | 504 => reason(code),
        _ => return None,
    })
}

/// nginx's own codes 494–497 are answered as 400 (with a page naming the real cause); the
/// code stays what `error_page` matches and the access log records.
pub fn wire_status(code: u16) -> u16 {
    if (494..=497).contains(&code) {
        400
    } else {
        code
    }
}

/// The text nginx's page for 494–497 gives below "400 Bad Request".
fn bad_request_cause(code: u16) -> Option<&'static str> {
    Some(match code {
        494 => "Request Header Or Cookie Too Large",
        495 => "The SSL certificate error",
        496 => "No required SSL certificate was sent",
        497 => "The plain HTTP request was sent to HTTPS port",
        _ => return None,
    })
}

/// The HTML page nginx sends for a status without a body of its own.
pub fn status_page(code: u16) -> Bytes {
    if let Some(cause) = bad_request_cause(code) {
        return Bytes::from(format!(
            "<html>\r\n<head><title>400 {cause}</title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n<center>{cause}</center>\r\n<hr><center>firstbyte</center>\r\n</body>\r\n</html>\r\n"
        ));
    }
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

    #[test]
    fn certificate_errors_are_400_pages_naming_the_cause() {
        assert_eq!(wire_status(496), 400);
        assert_eq!(wire_status(495), 400);
        assert_eq!(wire_status(404), 404);
        let p = status_page(496);
        let s = std::str::from_utf8(&p).unwrap();
        assert!(s.contains("<title>400 No required SSL certificate was sent</title>"));
        assert!(s.contains("<h1>400 Bad Request</h1>"));
    }
}
