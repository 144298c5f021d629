//! The HTTP/1.1 request framing nginx refuses and hyper does not, seen on the bytes as
//! received ([`HeadScan`]).
//!
//! hyper normalises a request head before firstbyte sees it: it merges two equal
//! `Content-Length` lines into one, drops a `Content-Length` given beside
//! `Transfer-Encoding: chunked` (and closes the connection after the response, RFC 9112
//! §6.1), and answers a `Transfer-Encoding` whose last coding is not `chunked` with its own
//! 400. nginx refuses all of these from the head as received: a second `Content-Length` line
//! (400, a unique header), `Content-Length` beside `chunked` (400), any `Transfer-Encoding`
//! other than exactly `chunked` (501, as RFC 9112 §6.1's SHOULD for a coding the server does
//! not understand), and a chunked body it finds malformed while discarding it (400). The
//! scanner follows the request stream as hyper reads it (heads with httparse, as hyper, and
//! each body by hyper's framing rules) and records, per request head, the refusal nginx would
//! give ([`crate::http::conn::FramingRefusal`]); the service attaches it to the request whose
//! sequence number, method and target match, and the pipeline answers it and closes.
//!
//! Anything the scanner cannot follow as hyper does (a head it cannot parse, a protocol
//! upgrade, a head past the buffer bound) turns it off for the connection: hyper's own,
//! RFC-conforming, handling stands then, and no refusal can land on the wrong request. A
//! complete head with CRLF lines and no line naming a framing field is passed without a parse
//! (`plain_head`: nearly every request; a second httparse parse of each head cost ~4,000
//! instructions for a browser's): it has no body, and if httparse refuses it, hyper refuses
//! it as well and closes the connection.

use crate::http::conn::{FramingRefusal, Verdict};

/// hyper's default bound on the fields of a request head.
const MAX_FIELDS: usize = 100;

/// A field name as long as `Transfer-Encoding` that hyper takes as an ordinary field: a
/// coding hyper would refuse itself (400) is renamed to it in the bytes hyper reads, so that
/// the request reaches the service, which answers nginx's 501.
const INERT_TE: &[u8; 17] = b"X-Refused-Framing";

/// Where the scanner is in the request stream.
#[derive(Debug)]
enum State {
    /// Before or inside a request head; the head's bytes so far when it spans reads.
    Head(Vec<u8>),
    /// Inside a body of known length: the bytes left.
    Fixed(u64),
    /// Inside a chunked body.
    Chunked(Chunk),
    /// Not following the stream (see the module's text).
    Off,
}

/// hyper's chunked decoder's states (`proto::h1::decode::ChunkedState`), with the chunk
/// bytes left in `Data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    Start,
    Size(u64),
    SizeLws(u64),
    Extension(u64),
    SizeLf(u64),
    Data(u64),
    DataCr,
    DataLf,
    Trailer,
    TrailerLf,
    EndCr,
    EndLf,
}

/// The request stream of one HTTP/1.1 connection, as received.
#[derive(Debug)]
pub(super) struct HeadScan {
    state: State,
    /// Request heads seen so far (the last one's sequence number, from 1).
    heads: u64,
    /// The bound on a head (hyper's `max_buf_size`).
    max_head: usize,
}

/// What one head means for the scanner.
struct HeadFacts {
    verdict: Option<Verdict>,
    /// The body's framing as hyper reads it; None when the scanner stops following.
    next: Option<State>,
    /// Offsets (in the head) of a `Transfer-Encoding` name to rename ([`INERT_TE`]).
    rename: Option<usize>,
}

impl HeadScan {
    pub(super) fn new(max_head: usize) -> Self {
        Self {
            state: State::Head(Vec::new()),
            heads: 0,
            max_head,
        }
    }

    /// Follows `bytes`, just read and not yet seen by hyper; may rename a field in them (see
    /// [`INERT_TE`]). Verdicts go to `out`.
    pub(super) fn feed(&mut self, mut bytes: &mut [u8], out: &mut dyn FnMut(Verdict)) {
        while !bytes.is_empty() {
            match &mut self.state {
                State::Off => return,
                State::Fixed(left) => {
                    let n = (*left).min(bytes.len() as u64);
                    *left -= n;
                    bytes = &mut bytes[n as usize..];
                    if *left == 0 {
                        self.state = State::Head(Vec::new());
                    }
                }
                State::Chunked(c) => match chunk_step(c, bytes) {
                    Ok((used, done)) => {
                        bytes = &mut bytes[used..];
                        if done {
                            self.state = State::Head(Vec::new());
                        }
                    }
                    Err(()) => {
                        out(Verdict {
                            seq: self.heads,
                            method: None,
                            refusal: FramingRefusal {
                                status: 400,
                                reason: "client sent invalid chunked body while reading client request body"
                                    .into(),
                            },
                        });
                        self.state = State::Off;
                    }
                },
                State::Head(held) => {
                    let used = if held.is_empty() {
                        match self.head(bytes, 0, out) {
                            Some(n) => n,
                            None => {
                                if matches!(self.state, State::Head(_)) {
                                    self.hold(bytes);
                                }
                                return;
                            }
                        }
                    } else {
                        let mut head = std::mem::take(held);
                        let before = head.len();
                        head.extend_from_slice(bytes);
                        let mut copy = head.clone();
                        let r = self.head(&mut copy, before, out);
                        // A renamed name lies in `bytes` (see `head`): copy it back.
                        if copy[before..] != head[before..] {
                            bytes.copy_from_slice(&copy[before..]);
                        }
                        match r {
                            Some(n) => n - before,
                            None => {
                                if matches!(self.state, State::Head(_)) {
                                    self.hold(&head);
                                }
                                return;
                            }
                        }
                    };
                    bytes = &mut bytes[used..];
                }
            }
        }
    }

    /// Keeps an incomplete head, or stops following one past the bound.
    fn hold(&mut self, bytes: &[u8]) {
        if let State::Head(held) = &mut self.state {
            if held.len() + bytes.len() > self.max_head {
                self.state = State::Off;
            } else {
                held.extend_from_slice(bytes);
            }
        }
    }

    /// Parses a head at the start of `buf` (whose bytes from `fresh` on are this read's):
    /// its length once complete, the state set to its body's framing. None while incomplete
    /// (the state unchanged) or when the scanner stops (the state `Off`).
    fn head(
        &mut self,
        buf: &mut [u8],
        fresh: usize,
        out: &mut dyn FnMut(Verdict),
    ) -> Option<usize> {
        // Nearly every head names no framing field: nothing to judge, no body to follow.
        if let Some(len) = plain_head(buf) {
            self.heads += 1;
            self.state = State::Head(Vec::new());
            return Some(len);
        }
        // As hyper: no need to zero the fields httparse fills.
        let mut fields = [const { std::mem::MaybeUninit::uninit() }; MAX_FIELDS];
        let mut req = httparse::Request::new(&mut []);
        let parsed = httparse::ParserConfig::default().parse_request_with_uninit_headers(
            &mut req,
            buf,
            &mut fields,
        );
        let len = match parsed {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return None,
            Err(_) => {
                self.state = State::Off;
                return None;
            }
        };
        self.heads += 1;
        let facts = judge(&req, buf.as_ptr());
        if let Some(mut v) = facts.verdict {
            v.seq = self.heads;
            out(v);
        }
        match (facts.rename, facts.next) {
            (Some(at), _) => {
                // After a refusal the connection closes: nothing more to follow.
                if at >= fresh {
                    buf[at..at + INERT_TE.len()].copy_from_slice(INERT_TE);
                }
                self.state = State::Off;
                None
            }
            (None, Some(next)) => {
                self.state = next;
                Some(len)
            }
            (None, None) => {
                self.state = State::Off;
                None
            }
        }
    }

    #[cfg(test)]
    fn is_off(&self) -> bool {
        matches!(self.state, State::Off)
    }
}

/// The length of a complete head at the start of `buf` that [`judge`] would pass with no
/// body (the next bytes are the next head), found without parsing it: every line ends in
/// CRLF, the method is not `CONNECT`, and no line begins with a name that frames a body or
/// leaves HTTP (`Transfer-Encoding`, `Content-Length`, `Upgrade`, any case). None sends the
/// head to httparse and [`judge`] (a head still incomplete, bare LFs, leading empty lines,
/// a framing field). A head this passes that httparse would refuse is refused by hyper too
/// (the same parser), which closes the connection: nothing follows it to mis-frame.
fn plain_head(buf: &[u8]) -> Option<usize> {
    const FRAMING: [&[u8]; 3] = [b"transfer-encoding", b"content-length", b"upgrade"];
    let first = *buf.first()?;
    if first == b'\r' || first == b'\n' || buf.get(..7)?.eq_ignore_ascii_case(b"CONNECT") {
        return None;
    }
    let mut start = 0;
    for nl in memchr::memchr_iter(b'\n', buf) {
        if nl == start || buf[nl - 1] != b'\r' {
            return None;
        }
        let line = &buf[start..nl - 1];
        if line.is_empty() {
            return Some(nl + 1);
        }
        // Lines after the request line, by their first letter, then in full.
        if start > 0
            && matches!(line[0] | 0x20, b't' | b'c' | b'u')
            && FRAMING.iter().any(|n| {
                line.get(..n.len())
                    .is_some_and(|l| l.eq_ignore_ascii_case(n))
            })
        {
            return None;
        }
        start = nl + 1;
    }
    None
}

/// The verdict and the body's framing of a parsed head; `base` is the buffer's start (field
/// names are slices of it).
fn judge(req: &httparse::Request<'_, '_>, base: *const u8) -> HeadFacts {
    let method = req.method.unwrap_or_default();
    let target = req.path.unwrap_or_default();
    let http11 = req.version == Some(1);
    let mut te = Fields::default();
    let mut cl = Fields::default();
    let mut upgrade = method.eq_ignore_ascii_case("CONNECT");
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            te.add(h);
        } else if h.name.eq_ignore_ascii_case("content-length") {
            cl.add(h);
        } else if h.name.eq_ignore_ascii_case("upgrade") && http11 {
            upgrade = true;
        }
    }
    let text = |v: &[u8]| String::from_utf8_lossy(v).into_owned();
    let refuse = |status: u16, reason: String| {
        Some(Verdict {
            seq: 0,
            method: Some((method.into(), target.into())),
            refusal: FramingRefusal { status, reason },
        })
    };
    // nginx's order: a unique field twice while the head is read, then the framing.
    let mut verdict = None;
    let mut rename = None;
    if let (Some(first), Some(second)) = (cl.first, cl.second) {
        verdict = refuse(
            400,
            format!(
                "client sent duplicate header line: \"Content-Length: {}\", previous value: \"Content-Length: {}\" while reading client request headers",
                text(second.value),
                text(first.value)
            ),
        );
    } else if let (Some(only), None, true) = (te.first, te.second, http11) {
        let value = only.value;
        if !value.eq_ignore_ascii_case(b"chunked") {
            verdict = refuse(
                501,
                format!(
                    "client sent unknown \"Transfer-Encoding\": \"{}\" while reading client request headers",
                    text(value)
                ),
            );
            if !hyper_chunked(value) {
                // hyper would answer 400 itself: the field is renamed so that the request
                // reaches the service (which refuses it and closes).
                rename = Some(only.name.as_ptr() as usize - base as usize);
            }
        } else if cl.first.is_some() {
            verdict = refuse(
                400,
                "client sent \"Content-Length\" and \"Transfer-Encoding\" headers at the same time while reading client request headers"
                    .into(),
            );
        }
    }
    if rename.is_some() {
        // hyper parses the renamed head as a request without that coding: it must be
        // refused whatever hyper makes of its target, so the verdict goes by sequence alone.
        if let Some(v) = &mut verdict {
            v.method = None;
        }
    }
    // The body as hyper frames it (`proto::h1::role::Server::parse`).
    let next = if verdict.is_some() || upgrade {
        // A refusal closes the connection; an upgrade may leave HTTP.
        None
    } else if let Some(last) = te.last {
        (http11 && hyper_chunked(last.value)).then_some(State::Chunked(Chunk::Start))
    } else if let Some(c) = cl.first {
        // A length as hyper reads it: ASCII digits only (the request contract's rule).
        crate::http::contract::content_length(c.value).map(|n| {
            if n == 0 {
                State::Head(Vec::new())
            } else {
                State::Fixed(n)
            }
        })
    } else {
        Some(State::Head(Vec::new()))
    };
    HeadFacts {
        verdict,
        next,
        rename,
    }
}

/// The lines of one field name in a head: the first, the second and the last.
#[derive(Default)]
struct Fields<'a, 'h> {
    first: Option<&'a httparse::Header<'h>>,
    second: Option<&'a httparse::Header<'h>>,
    last: Option<&'a httparse::Header<'h>>,
}

impl<'a, 'h> Fields<'a, 'h> {
    fn add(&mut self, h: &'a httparse::Header<'h>) {
        if self.first.is_none() {
            self.first = Some(h);
        } else if self.second.is_none() {
            self.second = Some(h);
        }
        self.last = Some(h);
    }
}

/// hyper's test for a chunked body: the last coding of the (last) field is `chunked`.
fn hyper_chunked(value: &[u8]) -> bool {
    std::str::from_utf8(value).is_ok_and(|s| {
        s.rsplit(',')
            .next()
            .is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"))
    })
}

/// Follows a chunked body through `bytes` as hyper's decoder does: the bytes used and
/// whether the body ended; Err where hyper's decoder fails.
fn chunk_step(c: &mut Chunk, bytes: &[u8]) -> Result<(usize, bool), ()> {
    let mut i = 0;
    while i < bytes.len() {
        if let Chunk::Data(left) = c {
            let n = (*left).min((bytes.len() - i) as u64);
            *left -= n;
            i += n as usize;
            if *left == 0 {
                *c = Chunk::DataCr;
            }
            continue;
        }
        let b = bytes[i];
        i += 1;
        let hex = |size: u64| -> Result<u64, ()> {
            let d = (b as char).to_digit(16).ok_or(())?;
            size.checked_mul(16)
                .and_then(|s| s.checked_add(u64::from(d)))
                .ok_or(())
        };
        *c = match *c {
            Chunk::Start => Chunk::Size(hex(0)?),
            Chunk::Size(s) => match b {
                b'\t' | b' ' => Chunk::SizeLws(s),
                b';' => Chunk::Extension(s),
                b'\r' => Chunk::SizeLf(s),
                _ => Chunk::Size(hex(s)?),
            },
            Chunk::SizeLws(s) => match b {
                b'\t' | b' ' => Chunk::SizeLws(s),
                b';' => Chunk::Extension(s),
                b'\r' => Chunk::SizeLf(s),
                _ => return Err(()),
            },
            Chunk::Extension(s) => match b {
                b'\r' => Chunk::SizeLf(s),
                b'\n' => return Err(()),
                _ => Chunk::Extension(s),
            },
            Chunk::SizeLf(s) => match (b, s) {
                (b'\n', 0) => Chunk::EndCr,
                (b'\n', s) => Chunk::Data(s),
                _ => return Err(()),
            },
            // Taken in bulk above: never reached with a byte.
            Chunk::Data(left) => Chunk::Data(left),
            Chunk::DataCr if b == b'\r' => Chunk::DataLf,
            Chunk::DataLf if b == b'\n' => Chunk::Start,
            Chunk::DataCr | Chunk::DataLf => return Err(()),
            Chunk::Trailer if b == b'\r' => Chunk::TrailerLf,
            Chunk::Trailer => Chunk::Trailer,
            Chunk::TrailerLf if b == b'\n' => Chunk::EndCr,
            Chunk::TrailerLf => return Err(()),
            Chunk::EndCr if b == b'\r' => Chunk::EndLf,
            Chunk::EndCr => Chunk::Trailer,
            Chunk::EndLf if b == b'\n' => return Ok((i, true)),
            Chunk::EndLf => return Err(()),
        };
    }
    Ok((i, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `parts` one read at a time; the verdicts and the bytes as hyper would read them.
    fn scan(parts: &[&str]) -> (HeadScan, Vec<Verdict>, String) {
        let mut s = HeadScan::new(64 * 1024);
        let mut got = Vec::new();
        let mut seen = String::new();
        for p in parts {
            let mut b = p.as_bytes().to_vec();
            s.feed(&mut b, &mut |v| got.push(v));
            seen.push_str(std::str::from_utf8(&b).unwrap());
        }
        (s, got, seen)
    }

    fn statuses(v: &[Verdict]) -> Vec<(u64, u16)> {
        v.iter().map(|v| (v.seq, v.refusal.status)).collect()
    }

    #[test]
    fn sound_requests_pass_and_are_followed() {
        let get = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        let post = "POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
        let chunked = "POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nT: v\r\n\r\n";
        let all = [get, post, chunked, get].concat();
        let (s, v, seen) = scan(&[&all]);
        assert!(v.is_empty(), "{v:?}");
        assert_eq!(s.heads, 4);
        assert_eq!(seen, all, "nothing renamed");
        // The same split at every byte.
        let mut parts: Vec<String> = all.chars().map(String::from).collect();
        parts.push(get.into());
        let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
        let (s, v, _) = scan(&refs);
        assert!(v.is_empty(), "{v:?}");
        assert_eq!(s.heads, 5);
        assert!(!s.is_off());
    }

    #[test]
    fn plain_heads_are_those_httparse_and_judge_pass_without_a_body() {
        // Complete heads with no framing field: plain, with httparse's length.
        for head in [
            "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET /x HTTP/1.0\r\n\r\n",
            "GET /assets/a.js HTTP/1.1\r\nHost: a\r\nUser-Agent: u\r\nCookie: c=1; d=2\r\nContent-Type: x\r\nTE: trailers\r\n\r\n",
        ] {
            let mut fields = [httparse::EMPTY_HEADER; 16];
            let mut req = httparse::Request::new(&mut fields);
            let n = match req.parse(head.as_bytes()) {
                Ok(httparse::Status::Complete(n)) => n,
                other => panic!("{head:?}: {other:?}"),
            };
            let facts = judge(&req, head.as_ptr());
            assert!(facts.verdict.is_none() && facts.rename.is_none());
            assert!(matches!(facts.next, Some(State::Head(_))), "{head:?}");
            assert_eq!(plain_head(head.as_bytes()), Some(n), "{head:?}");
            // With the next head after it (pipelined): the same length.
            let two = format!("{head}{head}");
            assert_eq!(plain_head(two.as_bytes()), Some(n), "{head:?}");
            // Cut anywhere: incomplete, left to httparse.
            for cut in 0..head.len() {
                assert_eq!(plain_head(&head.as_bytes()[..cut]), None, "{head:?} at {cut}");
            }
        }
        // Left to httparse and judge.
        for head in [
            "GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
            "GET / HTTP/1.1\r\ncontent-length: 0\r\n\r\n",
            "POST / HTTP/1.1\r\nTRANSFER-ENCODING: chunked\r\n\r\n",
            "GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
            "CONNECT a:443 HTTP/1.1\r\n\r\n",
            "connect a:443 HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\nHost: a\n\n",
            "GET / HTTP/1.1\r\nHost: a\n\r\n",
            "\r\nGET / HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(plain_head(head.as_bytes()), None, "{head:?}");
        }
    }

    #[test]
    fn a_body_that_looks_like_a_head_is_a_body() {
        let inner = "GET /x HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n";
        let post = format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n{inner}GET / HTTP/1.1\r\n\r\n",
            inner.len()
        );
        let (s, v, _) = scan(&[&post]);
        assert!(v.is_empty(), "{v:?}");
        assert_eq!(s.heads, 2);
    }

    #[test]
    fn nginx_refusals_are_named_per_head() {
        let get = "GET / HTTP/1.1\r\n\r\n";
        let dup = "GET /d HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n";
        let (s, v, _) = scan(&[get, dup, get]);
        assert_eq!(statuses(&v), [(2, 400)]);
        assert_eq!(
            v[0].method.as_ref().map(|(m, t)| (&**m, &**t)),
            Some(("GET", "/d"))
        );
        assert!(v[0].refusal.reason.contains("duplicate header line"));
        assert!(s.is_off(), "the connection closes after a refusal");

        let both =
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n";
        let (_, v, seen) = scan(&[both]);
        assert_eq!(statuses(&v), [(1, 400)]);
        assert!(v[0].refusal.reason.contains("at the same time"));
        assert_eq!(seen, both, "hyper drops the length itself");

        // A coding hyper takes (chunked last) but nginx does not know: 501, not renamed.
        let list = "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n";
        let (_, v, seen) = scan(&[list]);
        assert_eq!(statuses(&v), [(1, 501)]);
        assert_eq!(seen, list);
    }

    #[test]
    fn a_coding_hyper_refuses_is_renamed_in_the_bytes_read() {
        for te in ["identity", "chunked, identity"] {
            let req =
                format!("GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: {te}\r\n\r\n0\r\n\r\n");
            let (s, v, seen) = scan(&[&req]);
            assert_eq!(statuses(&v), [(1, 501)], "{te}");
            assert!(v[0].method.is_none(), "by sequence alone");
            assert_eq!(seen, req.replace("Transfer-Encoding", "X-Refused-Framing"));
            assert!(s.is_off());
            // The name in an earlier read than the head's end: hyper has those bytes as
            // they were (and answers 400 itself); in the last read, the rename lands.
            for name_read_before in ["Encoding", ": "] {
                let at = req.rfind(name_read_before).unwrap();
                let (_, v, seen) = scan(&[&req[..at], &req[at..]]);
                assert_eq!(statuses(&v), [(1, 501)]);
                assert_eq!(seen, req);
            }
            let at = req.find("Host").unwrap();
            let (_, v, seen) = scan(&[&req[..at], &req[at..]]);
            assert_eq!(statuses(&v), [(1, 501)]);
            assert_eq!(seen, req.replace("Transfer-Encoding", "X-Refused-Framing"));
        }
    }

    #[test]
    fn http10_and_repeated_codings_are_left_to_hyper_and_the_pipeline() {
        let old = "GET / HTTP/1.0\r\nTransfer-Encoding: identity\r\n\r\n";
        let (_, v, seen) = scan(&[old]);
        assert!(v.is_empty());
        assert_eq!(seen, old);
        let twice = "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        let (s, v, _) = scan(&[twice]);
        assert!(v.is_empty());
        assert!(!s.is_off());
    }

    #[test]
    fn a_malformed_chunk_is_refused_for_its_head() {
        let get = "GET / HTTP/1.1\r\n\r\n";
        let runaway =
            "GET /discard HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nSEE-THIS\r\n0\r\n\r\n";
        let (s, v, _) = scan(&[get, runaway]);
        assert_eq!(statuses(&v), [(2, 400)]);
        assert!(v[0].method.is_none(), "found in the body, after the head");
        assert!(s.is_off());
        for bad in ["x\r\n", "5 x\r\n", "5\rx", "5;a\n", "1\r\nab", "0\r\nT\rx"] {
            let req = format!("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n{bad}");
            let (_, v, _) = scan(&[&req]);
            assert_eq!(statuses(&v), [(1, 400)], "{bad:?}");
        }
        let huge = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n";
        assert_eq!(statuses(&scan(&[huge]).1), [(1, 400)], "size overflow");
    }

    #[test]
    fn what_it_cannot_follow_turns_it_off() {
        for req in [
            "GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
            "GET / HTTP/1.1\r\nBad Name: x\r\nContent-Length: 0\r\n\r\n",
            "GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
        ] {
            let (s, v, _) = scan(&[
                req,
                "GET / HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
            ]);
            assert!(s.is_off(), "{req:?}");
            assert!(v.is_empty(), "{req:?}");
        }
        let mut s = HeadScan::new(16);
        s.feed(&mut b"GET / HTTP/1.1\r\nHost: aaaa".to_vec(), &mut |_| {});
        assert!(s.is_off(), "past the bound");
        // A head httparse refuses that names no framing field is passed as plain: hyper
        // refuses it too (400) and closes, so nothing after it is ever served.
        let (s, v, _) = scan(&["GET / HTTP/1.1\r\nBad Name: x\r\n\r\n"]);
        assert!(!s.is_off() && v.is_empty() && s.heads == 1);
    }
}
