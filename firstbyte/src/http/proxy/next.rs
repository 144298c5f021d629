//! `proxy_next_upstream`: whether a failed attempt goes on to the next server, as nginx's
//! `ngx_http_upstream_next` and `ngx_http_upstream_test_next` decide.
//!
//! Plain code: the attempt's outcome, the request's facts and the settings in, a yes or no
//! out. The rules (nginx's): the condition must be listed; tries are left; the
//! `proxy_next_upstream_timeout` since the first try has not passed; POST, LOCK and PATCH
//! once sent need `non_idempotent` as well; and a request whose body was streamed
//! (`proxy_request_buffering off`) cannot be sent again once it went; a body read whole first
//! (`on`) can. Once
//! the response has started nothing is retried: the caller asks only before that.

use std::time::Duration;

use http::Method;

use crate::conf::model::NextUpstream;

/// How an attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Connection refused or reset, closed before the header.
    Error,
    /// Connect, send or header timeout.
    Timeout,
    /// An invalid response header.
    InvalidHeader,
    /// A response with this status.
    Status(u16),
}

impl Outcome {
    /// The `proxy_next_upstream` bit of this outcome (None: a status it cannot name).
    fn bit(self) -> Option<u16> {
        match self {
            Outcome::Error => Some(NextUpstream::ERROR),
            Outcome::Timeout => Some(NextUpstream::TIMEOUT),
            Outcome::InvalidHeader => Some(NextUpstream::INVALID_HEADER),
            Outcome::Status(s) => NextUpstream::status_bit(s),
        }
    }

    /// Whether it counts against the server's `max_fails` (nginx: every next-upstream
    /// condition but 403 and 404).
    pub fn is_failure(self) -> bool {
        !matches!(self, Outcome::Status(403 | 404))
    }
}

/// The request's side of the decision.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The request method.
    pub method: &'a Method,
    /// Whether the request (its header) went to the server in this attempt.
    pub sent: bool,
    /// Whether it carries a streamed body (gone once sent; a body read whole is not one).
    pub has_body: bool,
}

/// Whether to try the next server after `outcome`. `tries_left`: attempts still allowed
/// after this one; `elapsed`: since the first attempt began.
pub fn go_next(
    conf: NextUpstream,
    timeout: Duration,
    outcome: Outcome,
    req: Request<'_>,
    tries_left: usize,
    elapsed: Duration,
) -> bool {
    let Some(mut need) = outcome.bit() else {
        return false;
    };
    if req.sent && matches!(req.method.as_str(), "POST" | "LOCK" | "PATCH") {
        need |= NextUpstream::NON_IDEMPOTENT;
    }
    tries_left > 0
        && conf.0 & need == need
        && !(req.sent && req.has_body)
        && (timeout.is_zero() || elapsed < timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GET: Request<'static> = Request {
        method: &Method::GET,
        sent: true,
        has_body: false,
    };

    fn conf(bits: u16) -> NextUpstream {
        NextUpstream(bits)
    }

    #[test]
    fn listed_conditions_only() {
        let d = NextUpstream::DEFAULT;
        let z = Duration::ZERO;
        assert!(go_next(d, z, Outcome::Error, GET, 1, z));
        assert!(go_next(d, z, Outcome::Timeout, GET, 1, z));
        assert!(!go_next(d, z, Outcome::InvalidHeader, GET, 1, z));
        assert!(!go_next(d, z, Outcome::Status(502), GET, 1, z));
        let c = conf(NextUpstream::HTTP_502 | NextUpstream::HTTP_404);
        assert!(go_next(c, z, Outcome::Status(502), GET, 1, z));
        assert!(go_next(c, z, Outcome::Status(404), GET, 1, z));
        assert!(!go_next(c, z, Outcome::Status(503), GET, 1, z));
        assert!(
            !go_next(c, z, Outcome::Status(501), GET, 1, z),
            "not nameable"
        );
        assert!(!go_next(c, z, Outcome::Error, GET, 1, z));
        assert!(!go_next(conf(0), z, Outcome::Error, GET, 1, z), "off");
    }

    #[test]
    fn tries_and_timeout_bound_it() {
        let d = NextUpstream::DEFAULT;
        let z = Duration::ZERO;
        assert!(!go_next(d, z, Outcome::Error, GET, 0, z));
        let t = Duration::from_secs(2);
        assert!(go_next(
            d,
            t,
            Outcome::Error,
            GET,
            1,
            Duration::from_secs(1)
        ));
        assert!(!go_next(
            d,
            t,
            Outcome::Error,
            GET,
            1,
            Duration::from_secs(2)
        ));
    }

    #[test]
    fn non_idempotent_needs_the_flag_once_sent() {
        let d = NextUpstream::DEFAULT;
        let z = Duration::ZERO;
        let post = |sent| Request {
            method: &Method::POST,
            sent,
            has_body: false,
        };
        assert!(!go_next(d, z, Outcome::Error, post(true), 1, z));
        assert!(
            go_next(d, z, Outcome::Error, post(false), 1, z),
            "not sent: any method"
        );
        let with = conf(NextUpstream::DEFAULT.0 | NextUpstream::NON_IDEMPOTENT);
        assert!(go_next(with, z, Outcome::Error, post(true), 1, z));
        let patch = Request {
            method: &Method::PATCH,
            sent: true,
            has_body: false,
        };
        assert!(!go_next(d, z, Outcome::Timeout, patch, 1, z));
        let put = Request {
            method: &Method::PUT,
            sent: true,
            has_body: false,
        };
        assert!(
            go_next(d, z, Outcome::Timeout, put, 1, z),
            "PUT is idempotent"
        );
    }

    #[test]
    fn a_sent_body_is_never_resent() {
        let z = Duration::ZERO;
        let all = conf(0x7ff);
        let body = |sent| Request {
            method: &Method::PUT,
            sent,
            has_body: true,
        };
        assert!(!go_next(all, z, Outcome::Status(502), body(true), 3, z));
        assert!(go_next(all, z, Outcome::Error, body(false), 3, z));
    }

    #[test]
    fn failures_for_max_fails() {
        assert!(Outcome::Error.is_failure());
        assert!(Outcome::Status(502).is_failure());
        assert!(Outcome::Status(429).is_failure());
        assert!(!Outcome::Status(403).is_failure());
        assert!(!Outcome::Status(404).is_failure());
    }
}
