//! The request contract over every front end: one table of requests — malformed heads, host
//! and method tricks, framing that disagrees with itself, early data, access rules — each run
//! over HTTP/1.1, HTTP/2 and HTTP/3 against one server, with the answer each protocol must
//! give (nginx's, RFC 9114's where nginx has no HTTP/3 behaviour) and what a recording
//! upstream may see. A rule written for one protocol and missed on another fails here; every
//! mismatch is reported, not only the first. `CONTRACT_CASE=text` runs only the cases whose
//! description contains `text`.

mod support;

use support::proto::{Client, Got, Length, Outcome, Proto, Req};
use support::*;

const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    log_format contract '$server_protocol "$request" $status early=$ssl_early_data host=$http_host';
    access_log {dir}/access.log contract;
    ssl_session_cache shared:contract:1m;
    ssl_early_data on;
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port0} quic;
        http2 on;
        server_name localhost;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        max_headers 20;
        location / { return 200 "ok"; }
        location /secret/ { return 403 "secret"; }
        location /host { if ($http_host = "localhost") { return 403; } return 200 "host=$http_host"; }
        location /method { if ($request_method = DELETE) { return 403; } return 200 "m=$request_method"; }
        location /early { return 200 "early=$ssl_early_data"; }
        # Access rules guard proxied locations: `return` would answer before the access phase.
        location /deny/ { deny 127.0.0.1; allow all; proxy_pass http://127.0.0.1:{up}; }
        location /allow/ { allow 127.0.0.1; deny all; proxy_pass http://127.0.0.1:{up}; }
        location /auth/ {
            auth_basic "contract";
            auth_basic_user_file {dir}/htpasswd;
            proxy_set_header X-User $remote_user;
            proxy_pass http://127.0.0.1:{up};
        }
        location /up/ {
            proxy_set_header Host $http_host;
            proxy_set_header X-Real-IP $remote_addr;
            proxy_pass http://127.0.0.1:{up};
        }
        location /stream/ {
            proxy_request_buffering off;
            proxy_set_header Host $http_host;
            proxy_pass http://127.0.0.1:{up};
        }
        location /ro/ {
            limit_except GET { deny all; }
            proxy_pass http://127.0.0.1:{up};
        }
        location /echo { return 200 "[$http_x_real_ip]"; }
        location /small/ {
            client_max_body_size 10;
            proxy_pass http://127.0.0.1:{up};
        }
    }
}
"#;

/// What one protocol must answer.
#[derive(Debug, Clone, Copy)]
enum Exp {
    /// This status.
    S(u16),
    /// This status, or a stream reset / connection error (where the RFC makes the request
    /// malformed and nginx answers a status: both refuse it).
    SOrRefused(u16),
    /// Not served: any status from 400 up, a refusal, or a close (where the exact answer is
    /// a detail that differs between nginx's front ends and is said in the case).
    Refusal,
}

impl Exp {
    fn fits(self, o: &Outcome) -> bool {
        match (self, o) {
            (Exp::S(s), Outcome::Status(g)) => s == *g,
            (Exp::SOrRefused(s), Outcome::Status(g)) => s == *g,
            (Exp::SOrRefused(_), Outcome::Refused(_)) => true,
            (Exp::Refusal, Outcome::Status(g)) => *g >= 400,
            (Exp::Refusal, Outcome::Refused(_) | Outcome::Closed) => true,
            _ => false,
        }
    }
}

/// What the upstream may see of a run.
#[derive(Debug, Clone, Copy)]
enum Up {
    /// Not checked.
    Any,
    /// Nothing at all.
    Nothing,
    /// No request whose body came whole (a head may have gone ahead of the body).
    NotWhole,
    /// A request whose head has this text (compared in lower case).
    Has(&'static str),
    /// A request whose body is this.
    Body(&'static str),
    /// A request, and its head lacks this text.
    Lacks(&'static str),
}

/// One row of the table.
struct Case {
    what: &'static str,
    req: Req,
    /// HTTP/1.1's form of the request when it differs (a target form, a header HTTP/1.1 needs).
    h1_req: Option<Req>,
    /// Per protocol (HTTP/1.1, HTTP/2, HTTP/3); None: the case does not apply.
    exp: [Option<Exp>; 3],
    /// Why the protocols' answers differ, when they do.
    why: &'static str,
    /// Text the response body must hold (when the answer is a status).
    body: Option<&'static str>,
    up: Up,
}

impl Case {
    fn all(self, e: Exp) -> Case {
        Case {
            exp: [Some(e); 3],
            ..self
        }
    }
    fn h1(mut self, e: Option<Exp>) -> Case {
        self.exp[0] = e;
        self
    }
    fn h2(mut self, e: Option<Exp>) -> Case {
        self.exp[1] = e;
        self
    }
    fn h3(mut self, e: Option<Exp>) -> Case {
        self.exp[2] = e;
        self
    }
    fn h2h3(self, e: Option<Exp>) -> Case {
        self.h2(e).h3(e)
    }
    fn h1_req(mut self, r: Req) -> Case {
        self.h1_req = Some(r);
        self
    }
    fn why(mut self, w: &'static str) -> Case {
        self.why = w;
        self
    }
    fn body(mut self, b: &'static str) -> Case {
        self.body = Some(b);
        self
    }
    fn up(mut self, u: Up) -> Case {
        self.up = u;
        self
    }
}

fn case(what: &'static str, req: Req) -> Case {
    Case {
        what,
        req,
        h1_req: None,
        exp: [None; 3],
        why: "",
        body: None,
        up: Up::Any,
    }
}

use Exp::*;

/// Why HTTP/3 may reset where nginx answers 400.
const H3WHY: &str = "the h3 crate resets a malformed head (RFC 9114 §4.1.2, H3_MESSAGE_ERROR) before firstbyte sees it; nginx answers 400";

/// Basic-auth credentials for `user:password`.
const GOOD_AUTH: &str = "Basic dXNlcjpwYXNzd29yZA==";
const BAD_AUTH: &str = "Basic dXNlcjp3cm9uZw==";

/// The table. Long by nature: one row per rule, read top to bottom as the contract itself
/// (known-good rows first, so a harness fault shows on them before it shows as a hole).
fn cases() -> Vec<Case> {
    let body40 = "x".repeat(40);
    let fields25 = (0..25).fold(Req::get("/"), |r, i| r.field(format!("x-f{i}"), "1"));
    vec![
        // --- Known-good: the harness and the server agree on sound requests everywhere.
        case("a plain GET is served", Req::get("/"))
            .all(S(200))
            .body("ok"),
        case("a proxied GET reaches the upstream", Req::get("/up/ok"))
            .all(S(200))
            .body("up")
            .up(Up::Has("get /up/ok")),
        case(
            "a proxied POST arrives with its body",
            Req::new("POST", "/up/post").body("hello"),
        )
        .all(S(200))
        .up(Up::Body("hello")),
        case(
            "`te: trailers` is allowed",
            Req::get("/up/te").field("te", "trailers"),
        )
        .all(S(200))
        .up(Up::Has("get /up/te")),
        case(
            "`allow 127.0.0.1; deny all` lets loopback in",
            Req::get("/allow/x"),
        )
        .all(S(200))
        .up(Up::Has("get /allow/x")),
        case(
            "auth_basic with the right password",
            Req::get("/auth/x").field("authorization", GOOD_AUTH),
        )
        .all(S(200))
        .up(Up::Has("\r\nx-user: user\r\n")),
        case(
            "`if ($request_method = DELETE)` refuses DELETE",
            Req::new("DELETE", "/method"),
        )
        .all(S(403)),
        case(
            "a bodiless GET in 0-RTT is served, marked as early data",
            Req::get("/early").early(),
        )
        .all(S(200))
        .body("early=1"),
        // --- Hole 1: $http_host from :authority.
        case(
            "`if ($http_host = localhost)` sees :authority when no Host field came",
            Req::get("/host"),
        )
        .all(S(403))
        .why("HTTP/1.1 sends the authority as its Host line; nginx makes Host from :authority"),
        case(
            "`proxy_set_header Host $http_host` sends :authority as Host upstream",
            Req::get("/up/host"),
        )
        .all(S(200))
        .up(Up::Has("\r\nhost: localhost\r\n")),
        case(
            "a Host field without :authority is $http_host too",
            Req::get("/host")
                .authority(None)
                .field("host", "localhost"),
        )
        .all(S(403)),
        // --- Hole 2: method tokens.
        case("a lower-case method is refused", Req::new("delete", "/up/m"))
            .all(S(400))
            .h2(Some(SOrRefused(400)))
            .why("nginx answers 400; HTTP/2 may reset the stream (malformed request)")
            .up(Up::Nothing),
        case("a mixed-case method is refused", Req::new("GeT", "/up/m"))
            .all(S(400))
            .h2(Some(SOrRefused(400)))
            .why("nginx answers 400; HTTP/2 may reset the stream (malformed request)")
            .up(Up::Nothing),
        case(
            "a method with a byte outside A-Z _ - is refused",
            Req::new("GE.T", "/up/m"),
        )
        .all(S(400))
        .h2(Some(SOrRefused(400)))
        .why("nginx answers 400; HTTP/2 may reset the stream (malformed request)")
        .up(Up::Nothing),
        // --- Hole 3: framing that disagrees with itself (HTTP/2 and HTTP/3).
        case(
            "content-length 5 with 40 bytes of DATA",
            Req::new("POST", "/up/cl")
                .body(&body40)
                .length(Length::Value("5".into())),
        )
        .h2h3(Some(SOrRefused(400)))
        .up(Up::Nothing),
        case(
            "content-length 100 with 5 bytes then the end of the stream",
            Req::new("POST", "/up/cl")
                .body("hello")
                .length(Length::Value("100".into())),
        )
        .h2h3(Some(SOrRefused(400)))
        .up(Up::Nothing),
        case(
            "content-length 100 with 5 bytes, proxy_request_buffering off",
            Req::new("POST", "/stream/cl")
                .body("hello")
                .length(Length::Value("100".into())),
        )
        .h2h3(Some(SOrRefused(400)))
        .why("unbuffered, the head may go upstream before the body ends; the body must not")
        .up(Up::NotWhole),
        case(
            "content-length 5 with 40 bytes, proxy_request_buffering off",
            Req::new("POST", "/stream/cl")
                .body(&body40)
                .length(Length::Value("5".into())),
        )
        .h2h3(Some(SOrRefused(400)))
        .why("unbuffered, the head may go upstream before the body ends; the body must not")
        .up(Up::NotWhole),
        case(
            "`transfer-encoding: chunked` is malformed over HTTP/2 and HTTP/3",
            Req::new("POST", "/up/te")
                .field("transfer-encoding", "chunked")
                .body("5\r\nhello\r\n0\r\n\r\n")
                .length(Length::Absent),
        )
        .h2h3(Some(SOrRefused(400)))
        .up(Up::Nothing),
        case(
            "`upgrade: websocket` with `connection: upgrade` is malformed",
            Req::get("/up/ws")
                .field("connection", "upgrade")
                .field("upgrade", "websocket"),
        )
        .h2h3(Some(SOrRefused(400)))
        .up(Up::Nothing),
        case(
            "`connection: keep-alive` is malformed",
            Req::get("/up/ka").field("connection", "keep-alive"),
        )
        .h2h3(Some(SOrRefused(400)))
        .up(Up::Nothing),
        case(
            "`keep-alive` is malformed",
            Req::get("/up/ka").field("keep-alive", "timeout=5"),
        )
        .h2h3(Some(SOrRefused(400)))
        .up(Up::Nothing),
        case("`te: gzip` is malformed", Req::get("/up/te").field("te", "gzip"))
            .h2h3(Some(SOrRefused(400)))
            .up(Up::Nothing),
        // HTTP/1.1's framing analogues (request_framing.rs covers their connection closes).
        case(
            "content-length beside transfer-encoding: chunked",
            Req::new("POST", "/up/te")
                .field("transfer-encoding", "chunked")
                .field("content-length", "10")
                .body("0\r\n\r\n")
                .length(Length::Absent),
        )
        .h1(Some(S(400)))
        .h2h3(Some(SOrRefused(400)))
        .up(Up::Nothing),
        case(
            "two content-length fields that differ",
            Req::new("POST", "/up/cl")
                .field("content-length", "5")
                .field("content-length", "6")
                .body("hello")
                .length(Length::Absent),
        )
        .all(SOrRefused(400))
        .h1(Some(S(400)))
        .up(Up::Nothing),
        case(
            "two equal content-length fields over HTTP/1.1",
            Req::new("POST", "/up/cl")
                .field("content-length", "5")
                .field("content-length", "5")
                .body("hello")
                .length(Length::Absent),
        )
        .h1(Some(S(400)))
        .why("nginx refuses any duplicate over HTTP/1.1; over HTTP/2 and 3 equal values are one length (RFC 9110 §8.6)")
        .up(Up::Nothing),
        case(
            "an unknown transfer coding over HTTP/1.1",
            Req::new("POST", "/up/te")
                .field("transfer-encoding", "gzip, chunked")
                .body("0\r\n\r\n")
                .length(Length::Absent),
        )
        .h1(Some(S(501)))
        .up(Up::Nothing),
        // --- Hole 4: early data.
        case(
            "a GET with a body in 0-RTT gets 425",
            Req::get("/up/early-body")
                .body("0123456789abcdefg")
                .length(Length::Absent)
                .early(),
        )
        .h1_req(
            Req::get("/up/early-body")
                .body("0123456789abcdefg")
                .early(),
        )
        .all(S(425))
        .why("HTTP/1.1 frames the body with content-length: 17")
        .up(Up::Nothing),
        case(
            "a POST in 0-RTT gets 425",
            Req::new("POST", "/up/early-post").body("x").early(),
        )
        .all(S(425))
        .up(Up::Nothing),
        // --- Host rules.
        case(
            ":authority and Host that differ",
            Req::get("/up/h").field("host", "other.test"),
        )
        .all(S(400))
        .h3(Some(SOrRefused(400)))
        .why("over HTTP/1.1 the authority is a first Host line: two Host fields; HTTP/3: the h3 crate resets a malformed head (RFC 9114 §4.1.2, H3_MESSAGE_ERROR) before firstbyte sees it, nginx answers 400")
        .up(Up::Nothing),
        case(
            "two Host fields",
            Req::get("/up/h")
                .authority(None)
                .field("host", "localhost")
                .field("host", "localhost"),
        )
        .all(S(400))
        .up(Up::Nothing),
        case(
            "neither Host nor :authority",
            Req::get("/up/h").authority(None),
        )
        .all(S(400))
        .h3(Some(SOrRefused(400)))
        .why(H3WHY)
        .up(Up::Nothing),
        case(
            "a backslash in the authority",
            Req::get("/up/h").authority(Some("local\\host")),
        )
        .all(S(400))
        .h3(Some(SOrRefused(400)))
        .why(H3WHY)
        .up(Up::Nothing),
        case(
            "a control byte in a Host field",
            Req::get("/up/h")
                .authority(None)
                .field("host", "local\x01host"),
        )
        .all(S(400))
        .h3(Some(SOrRefused(400)))
        .why(H3WHY)
        .up(Up::Nothing),
        case(
            "an absolute-form target meets the location rule",
            Req::get("https://localhost/secret/x"),
        )
        .h1(Some(S(403))),
        case(
            "an absolute-form target without Host",
            Req::get("https://localhost/up/abs").authority(None),
        )
        .h1(Some(S(400)))
        .up(Up::Nothing),
        // --- Header rules.
        case(
            "an underscored field name is dropped (ignore_invalid_headers)",
            Req::get("/up/us")
                .field("x_real_ip", "6.6.6.6")
                .field("x-ok", "yes"),
        )
        .all(S(200))
        .up(Up::Lacks("6.6.6.6")),
        case(
            "a sound field beside dropped ones goes upstream",
            Req::get("/up/us")
                .field("x_real_ip", "6.6.6.6")
                .field("x.forwarded", "7.7.7.7")
                .field("x-ok", "yes"),
        )
        .all(S(200))
        .up(Up::Has("\r\nx-ok: yes\r\n")),
        case(
            "a dropped underscored field is no variable either",
            Req::get("/echo").field("x_real_ip", "6.6.6.6"),
        )
        .all(S(200))
        .body("[]"),
        case(
            "an invalid field name is dropped (ignore_invalid_headers)",
            Req::get("/up/dot").field("x.forwarded", "7.7.7.7"),
        )
        .all(S(200))
        .up(Up::Lacks("7.7.7.7")),
        case(
            "a NUL byte in a field value",
            Req::get("/up/nul").field("x-a", "a\0b"),
        )
        .all(SOrRefused(400))
        .h1(Some(S(400)))
        .up(Up::Nothing),
        case(
            "cookie fields do not count against max_headers over HTTP/2 and HTTP/3",
            (0..18)
                .fold(Req::get("/"), |r, i| r.field(format!("x-f{i}"), "1"))
                .field("cookie", "a=1")
                .field("cookie", "b=2")
                .field("cookie", "c=3"),
        )
        .h2h3(Some(S(200)))
        .why("nginx joins HTTP/2 and HTTP/3 cookie crumbs apart from the header list"),
                case("more fields than max_headers", fields25)
            .all(S(400))
            .why("nginx answers 494 as 400 on all three"),
        case(
            "one field line past large_client_header_buffers' 8k",
            Req::get("/").field("x-big", "b".repeat(10_000)),
        )
        .all(Refusal)
        .h1(Some(S(400)))
        .why("nginx: 494 (as 400) over HTTP/1.1, connection errors over HTTP/2 (ENHANCE_YOUR_CALM) and HTTP/3 (H3_EXCESSIVE_LOAD)"),
        case(
            "field lines past large_client_header_buffers' 4 x 8k together",
            (0..5).fold(Req::get("/"), |r, i| r.field(format!("x-big{i}"), "b".repeat(7_000))),
        )
        .all(S(400))
        .h2(Some(Refusal))
        .h3(Some(Refusal))
        .why("nginx: 494 (as 400) over HTTP/1.1 and HTTP/3, connection error ENHANCE_YOUR_CALM over HTTP/2; over HTTP/3 the h3 crate answers 431 to a field section past max_field_section_size before firstbyte sees it"),
        case("TRACE is not allowed", Req::new("TRACE", "/")).all(S(405)),
        case("CONNECT is not allowed", Req::new("CONNECT", "/"))
            .h1_req(Req::new("CONNECT", "localhost:443"))
            .all(S(405))
            .why("HTTP/1.1 sends the authority form; HTTP/2 and 3 a CONNECT with :path (as nginx takes it)"),
        case(
            "a body over client_max_body_size",
            Req::new("POST", "/small/x").body(&body40),
        )
        .all(S(413))
        .up(Up::Nothing),
        case(
            "a body over client_max_body_size without content-length",
            Req::new("POST", "/small/x")
                .body(&body40)
                .length(Length::Absent),
        )
        .h2h3(Some(S(413)))
        .up(Up::Nothing),
        case("`deny 127.0.0.1` refuses loopback", Req::get("/deny/x"))
            .all(S(403))
            .up(Up::Nothing),
        case("`limit_except GET` lets GET through", Req::get("/ro/x"))
            .all(S(200))
            .up(Up::Has("get /ro/x")),
        case("`limit_except GET` lets HEAD through", Req::new("HEAD", "/ro/x"))
            .all(S(200))
            .up(Up::Has("head /ro/x")),
        case(
            "`limit_except GET` refuses POST",
            Req::new("POST", "/ro/x").body("x"),
        )
        .all(S(403))
        .up(Up::Nothing),
        case("`limit_except GET` refuses DELETE", Req::new("DELETE", "/ro/x"))
            .all(S(403))
            .up(Up::Nothing),
        case("auth_basic without credentials", Req::get("/auth/x"))
            .all(S(401))
            .up(Up::Nothing),
        case(
            "auth_basic with a wrong password",
            Req::get("/auth/x").field("authorization", BAD_AUTH),
        )
        .all(S(401))
        .up(Up::Nothing),
        // --- Path tricks against `location /secret/`.
        case("`..` into the location", Req::get("/public/../secret/x")).all(S(403)),
        case(
            "`%2e%2e` into the location",
            Req::get("/public/%2e%2e/secret/x"),
        )
        .all(S(403)),
        case("`%2f` for the slash", Req::get("/secret%2fx")).all(S(403)),
        case("`//` before the location", Req::get("//secret/x")).all(S(403)),
        case("`/./` before the location", Req::get("/./secret/x")).all(S(403)),
        case("`..` above the root", Req::get("/../secret/x")).all(S(400)),
        case("`%00` in the path", Req::get("/secret/x%00")).all(S(400)),
        case("a raw NUL in the path", Req::get("/secret/x\0"))
            .all(SOrRefused(400))
            .h1(Some(S(400))),
    ]
}

/// The runs' tag in a proxied target: `run=NNNN` (fixed width, so no tag holds another).
fn tagged(req: &Req, run: usize) -> Req {
    let mut r = req.clone();
    let t = String::from_utf8_lossy(&r.target).into_owned();
    let proxied = [
        "/up/", "/stream/", "/small/", "/deny/", "/allow/", "/auth/", "/ro/",
    ];
    if proxied.iter().any(|p| t.contains(p)) {
        let sep = if t.contains('?') { '&' } else { '?' };
        r.target = format!("{t}{sep}run={run:04}").into_bytes();
    }
    r
}

#[test]
fn every_request_rule_holds_over_every_protocol() {
    let (up, seen) = recording_upstream();
    let dir = tempdir("contract");
    std::fs::write(dir.join("htpasswd"), "user:{PLAIN}password\n").expect("htpasswd");
    let port = free_port();
    let conf = render(&CONF.replace("{up}", &up.to_string()), &dir, &[port]);
    let server = Server::start_in(&dir, &conf, port);
    let client = Client::new(port, "localhost");
    let only = std::env::var("CONTRACT_CASE").ok();

    let cases = cases();
    let mut runs: Vec<(usize, Proto, usize, Got)> = Vec::new();
    let mut n_cases = 0;
    for (i, c) in cases.iter().enumerate() {
        if only.as_ref().is_some_and(|o| !c.what.contains(o.as_str())) {
            continue;
        }
        n_cases += 1;
        for (p, proto) in Proto::ALL.iter().enumerate() {
            if c.exp[p].is_none() {
                continue;
            }
            let run = runs.len() + 1;
            let base = match (proto, &c.h1_req) {
                (Proto::H1, Some(r)) => r,
                _ => &c.req,
            };
            let got = client.send(*proto, &tagged(base, run));
            runs.push((i, *proto, run, got));
        }
    }

    // The upstream's records, by run tag (read after every run is done).
    let seen = seen.lock().expect("upstream log").clone();
    let mut mismatches = Vec::new();
    for (i, proto, run, got) in &runs {
        let c = &cases[*i];
        let exp = c.exp[*proto as usize].expect("applies");
        let mut wrong = Vec::new();
        if !exp.fits(&got.outcome) {
            wrong.push(format!("expected {exp:?}, got {:?}", got.outcome));
        }
        if let (Some(b), Outcome::Status(_)) = (c.body, &got.outcome) {
            if exp.fits(&got.outcome) && !String::from_utf8_lossy(&got.body).contains(b) {
                wrong.push(format!(
                    "body {:?} lacks {b:?}",
                    String::from_utf8_lossy(&got.body)
                ));
            }
        }
        let tag = format!("run={run:04}");
        let mine: Vec<_> = seen
            .iter()
            .filter(|s| s.head.lines().next().unwrap_or("").contains(&tag))
            .collect();
        let heads = || {
            mine.iter()
                .map(|s| format!("{:?} + {} body bytes", s.head, s.body.len()))
                .collect::<Vec<_>>()
        };
        let whole = |s: &Seen| {
            let declared = s
                .head
                .to_ascii_lowercase()
                .lines()
                .find_map(|l| {
                    l.strip_prefix("content-length:")
                        .map(|v| v.trim().to_string())
                })
                .and_then(|v| v.parse::<usize>().ok());
            declared.is_none_or(|n| s.body.len() >= n)
        };
        match c.up {
            Up::Any => {}
            Up::Nothing if !mine.is_empty() => {
                wrong.push(format!("the upstream got {:?}", heads()))
            }
            Up::NotWhole if mine.iter().any(|s| whole(s)) => {
                wrong.push(format!("the upstream got a whole request {:?}", heads()))
            }
            Up::Has(t) if !mine.iter().any(|s| s.head.to_ascii_lowercase().contains(t)) => {
                wrong.push(format!("no upstream head with {t:?}: {:?}", heads()))
            }
            Up::Body(b) if !mine.iter().any(|s| s.body == b.as_bytes()) => {
                wrong.push(format!("no upstream body {b:?}: {:?}", heads()))
            }
            Up::Lacks(t)
                if mine.is_empty()
                    || mine.iter().any(|s| s.head.to_ascii_lowercase().contains(t)) =>
            {
                wrong.push(format!("want a head without {t:?}: {:?}", heads()))
            }
            _ => {}
        }
        if !wrong.is_empty() {
            let why = if c.why.is_empty() {
                String::new()
            } else {
                format!(" [{}]", c.why)
            };
            mismatches.push(format!(
                "{} over {}: {}{why}",
                c.what,
                proto.name(),
                wrong.join("; ")
            ));
        }
    }
    println!(
        "{n_cases} cases x protocols = {} runs, {} mismatches",
        runs.len(),
        mismatches.len()
    );
    for m in &mismatches {
        println!("MISMATCH {m}");
    }
    if only.is_some() {
        // A narrowed run is a debugging run: the server's side of it.
        let log = std::fs::read_to_string(server.dir.join("error.log")).unwrap_or_default();
        println!("error log:\n{log}");
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} runs differ from the contract:\n{}\n(error log: {})",
        mismatches.len(),
        runs.len(),
        mismatches.join("\n"),
        server.dir.join("error.log").display()
    );
}
