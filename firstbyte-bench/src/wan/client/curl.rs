//! The curl client: one `curl` process per request, timed by curl's own `-w` variables.
//!
//! `curl -sk --http2 -o /dev/null -w '...'` prints `time_connect`, `time_appconnect`,
//! `time_starttransfer`, `time_total` (seconds from the start), `http_version`,
//! `http_code` and `size_download`; `parse_write_out` turns that line into a `Fetched`. A new
//! process has no session cache, so every request is a full handshake.

use std::process::Command;

use super::{Fetched, Fetcher, Target, REQUEST_TIMEOUT_S};

/// curl's `-w` format: seven space-separated fields.
pub const WRITE_OUT: &str = "%{time_connect} %{time_appconnect} %{time_starttransfer} \
                             %{time_total} %{http_version} %{http_code} %{size_download}";

/// `curl --http2` or `--http1.1`.
#[derive(Debug, Clone)]
pub struct Curl {
    /// `--http2` when true, `--http1.1` otherwise.
    pub http2: bool,
}

impl Fetcher for Curl {
    fn fetch(&mut self, target: &Target) -> Fetched {
        let out = Command::new("curl")
            .args(["-sk", if self.http2 { "--http2" } else { "--http1.1" }])
            .args([
                "-o",
                "/dev/null",
                "--max-time",
                &REQUEST_TIMEOUT_S.to_string(),
            ])
            .args(["-w", WRITE_OUT])
            .arg(target.url())
            .output();
        match out {
            Err(e) => Fetched {
                error: Some(format!("cannot run curl: {e}")),
                ..Fetched::default()
            },
            Ok(out) => {
                let mut f = parse_write_out(&String::from_utf8_lossy(&out.stdout));
                if !out.status.success() {
                    f.status = 0;
                    f.error = Some(format!("curl exited with {}", out.status));
                }
                f
            }
        }
    }
}

/// Parses curl's `WRITE_OUT` line (seconds) into ms. Anything unparsable is a failed request.
pub fn parse_write_out(line: &str) -> Fetched {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let secs = |i: usize| {
        fields
            .get(i)
            .and_then(|s| s.parse::<f64>().ok())
            .map(|s| s * 1000.0)
    };
    let (Some(connect_ms), Some(appconnect_ms), Some(ttfb_ms), Some(total_ms)) =
        (secs(0), secs(1), secs(2), secs(3))
    else {
        return Fetched {
            error: Some(format!("unexpected curl output {line:?}")),
            ..Fetched::default()
        };
    };
    let status = fields.get(5).and_then(|s| s.parse().ok()).unwrap_or(0);
    Fetched {
        connect_ms,
        appconnect_ms,
        ttfb_ms,
        total_ms,
        http_version: fields.get(4).map_or(String::new(), |v| v.to_string()),
        status,
        body_bytes: fields.get(6).and_then(|s| s.parse().ok()).unwrap_or(0),
        error: None,
        // A new curl process per request: no session cache, never a ticket.
        handshake: Some(super::Handshake::Cold),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_curl_write_out() {
        let f = parse_write_out("0.101 0.202 0.305 0.4105 2 200 10240");
        assert!((f.connect_ms - 101.0).abs() < 1e-9);
        assert!((f.appconnect_ms - 202.0).abs() < 1e-9);
        assert!((f.ttfb_ms - 305.0).abs() < 1e-9);
        assert!((f.total_ms - 410.5).abs() < 1e-9);
        assert_eq!(f.http_version, "2");
        assert_eq!(f.status, 200);
        assert_eq!(f.body_bytes, 10240);
        assert!(f.error.is_none());
    }

    #[test]
    fn garbage_is_a_failure_not_a_panic() {
        let f = parse_write_out("");
        assert_eq!(f.status, 0);
        assert!(f.error.is_some());
        let f = parse_write_out("0.1 x 0.3 0.4 2 200 1");
        assert!(f.error.is_some());
    }
}
