//! Tests of [`SsiBody`]: commands, includes, stubs, at several split points of the page.

use super::*;

/// Variables `a`=`A<`, `uri`; includes answer "[URI?ARGS]", or 404 for `/missing`.
struct TestEnv;

impl Env for TestEnv {
    fn var(&self, name: &str) -> Option<String> {
        match name {
            "a" => Some("A<".into()),
            "empty" => Some(String::new()),
            _ => None,
        }
    }
    fn uri(&self) -> &str {
        "/dir/page.html"
    }
    fn include(&self, uri: String, args: Option<String>) -> Result<SubFuture, &'static str> {
        if uri == "/deep" {
            return Err("subrequests cycle");
        }
        Ok(Box::pin(async move {
            if uri == "/missing" {
                return (404, Body::Empty);
            }
            let s = format!("[{uri}?{}]", args.unwrap_or_default());
            (200, Body::full(s))
        }))
    }
}

fn render(input: &str, silent: bool) -> String {
    let settings = Settings {
        silent_errors: silent,
        value_length: 256,
    };
    let mut out = Vec::new();
    // Every split point of the source into two chunks gives the same output.
    for at in [None, Some(input.len() / 2), Some(1)] {
        let inner = match at {
            None => Body::full(input.to_string()),
            Some(at) => {
                let (a, b) = input.split_at(at.min(input.len()));
                let chunks: Vec<Result<Frame<Bytes>, std::io::Error>> = vec![
                    Ok(Frame::data(Bytes::copy_from_slice(a.as_bytes()))),
                    Ok(Frame::data(Bytes::copy_from_slice(b.as_bytes()))),
                ];
                Body::Stream(crate::http::body::BoxBody::new(TestStream(chunks.into())))
            }
        };
        let mut body = SsiBody::new(inner, Arc::new(TestEnv), settings.clone());
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut s = Vec::new();
        loop {
            use http_body::Body as _;
            match Pin::new(&mut body).poll_frame(&mut cx) {
                Poll::Ready(Some(Ok(f))) => s.extend_from_slice(&f.into_data().unwrap_or_default()),
                Poll::Ready(None) => break,
                Poll::Ready(Some(Err(e))) => panic!("{e}"),
                Poll::Pending => panic!("test includes never wait"),
            }
        }
        out.push(String::from_utf8(s).expect("utf-8"));
    }
    assert!(out.windows(2).all(|w| w[0] == w[1]), "{out:?}");
    out.remove(0)
}

struct TestStream(VecDeque<Result<Frame<Bytes>, std::io::Error>>);

impl http_body::Body for TestStream {
    type Data = Bytes;
    type Error = std::io::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        Poll::Ready(self.0.pop_front())
    }
}

/// `/slow` answers only once `/fast` (included after it) has started; `/fast` notes it.
struct SideBySide(Arc<std::sync::atomic::AtomicBool>);

impl Env for SideBySide {
    fn var(&self, _: &str) -> Option<String> {
        None
    }
    fn uri(&self) -> &str {
        "/"
    }
    fn include(&self, uri: String, _: Option<String>) -> Result<SubFuture, &'static str> {
        let started = self.0.clone();
        Ok(Box::pin(std::future::poll_fn(move |_| {
            use std::sync::atomic::Ordering::SeqCst;
            if uri == "/fast" {
                started.store(true, SeqCst);
                return Poll::Ready((200, Body::full("F")));
            }
            if started.load(SeqCst) {
                Poll::Ready((200, Body::full("S")))
            } else {
                Poll::Pending
            }
        })))
    }
}

fn drain(body: &mut SsiBody, polls: usize) -> Option<String> {
    use http_body::Body as _;
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut s = Vec::new();
    for _ in 0..polls {
        match Pin::new(&mut *body).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(f))) => s.extend_from_slice(&f.into_data().unwrap_or_default()),
            Poll::Ready(None) => return String::from_utf8(s).ok(),
            Poll::Ready(Some(Err(_))) | Poll::Pending => {}
        }
    }
    None
}

#[test]
fn includes_start_side_by_side_unless_waited() {
    let settings = Settings {
        silent_errors: false,
        value_length: 256,
    };
    let page = "a<!--#include virtual=\"/slow\" -->b<!--#include virtual=\"/fast\" -->c";
    let env = Arc::new(SideBySide(Default::default()));
    let mut body = SsiBody::new(Body::full(page), env, settings.clone());
    // In order, although the second answered first.
    assert_eq!(drain(&mut body, 100).as_deref(), Some("aSbFc"));
    // `wait=yes` holds the page: the second never starts, the first never answers.
    let page =
        "a<!--#include virtual=\"/slow\" wait=\"yes\" -->b<!--#include virtual=\"/fast\" -->c";
    let env = Arc::new(SideBySide(Default::default()));
    let mut body = SsiBody::new(Body::full(page), env, settings);
    assert_eq!(drain(&mut body, 100), None);
}

#[test]
fn echo_set_encodings() {
    assert_eq!(render("x<!--#echo var=\"a\" -->y", false), "xA&lt;y");
    assert_eq!(render("<!--#echo var=\"nope\" -->", false), "(none)");
    assert_eq!(
        render("<!--#echo var=\"nope\" default=\"d$a\" -->", false),
        "dA&lt;"
    );
    assert_eq!(
        render(
            "<!--#set var=\"v\" value=\"<$a\\$>\" --><!--#echo var=\"v\" encoding=\"none\" -->",
            false
        ),
        "<A<$>"
    );
    assert_eq!(
        render("<!--#echo var=\"a\" encoding=\"url\" -->", false),
        "A%3C"
    );
}

#[test]
fn conditions() {
    let t = "<!--#if expr=\"$a\" -->1<!--#else -->2<!--#endif -->";
    assert_eq!(render(t, false), "1");
    let t =
        "<!--#if expr=\"$empty\" -->1<!--#elif expr=\"$a = A<\" -->2<!--#else -->3<!--#endif -->";
    assert_eq!(render(t, false), "2");
    let t = "<!--#if expr=\"$a != A<\" -->1<!--#else -->2<!--#endif -->";
    assert_eq!(render(t, false), "2");
    let t = "<!--#if expr=\"$a = /^(?P<first>.)(.)\\$/\" --><!--#echo var=\"2\" --><!--#echo var=\"first\" --><!--#endif -->";
    assert_eq!(render(t, false), "&lt;A");
    // No `if` inside `if` (nginx): nesting is refused, not stacked.
    let t = "<!--#if expr=\"$a\" --><!--#if expr=\"$a\" -->x<!--#endif -->y";
    assert_eq!(render(t, true), "xy");
    assert_eq!(render("<!--#endif -->z", false), format!("{ERRMSG}z"));
}

#[test]
fn errors_and_config() {
    assert_eq!(render("<!--#bogus -->a", false), format!("{ERRMSG}a"));
    assert_eq!(render("<!--#bogus -->a", true), "a");
    assert_eq!(
        render("<!--#config errmsg=\"E\" --><!--#echo -->", false),
        "E"
    );
    assert_eq!(render("a<!--#echo var=\"a\"", false), format!("a{ERRMSG}"));
    assert_eq!(
        render("<!--#config timefmt=\"%Y\" --><!--#if expr=\"$date_gmt = /^2\\d\\d\\d\\$/\" -->ok<!--#endif -->", false),
        "ok"
    );
}

#[test]
fn includes_and_stubs() {
    assert_eq!(
        render("a<!--#include virtual=\"x.html?q=1\" -->b", false),
        "a[/dir/x.html?q=1]b"
    );
    assert_eq!(
        render("<!--#include virtual=\"/y?$a\" set=\"v\" -->-<!--#echo var=\"v\" encoding=\"none\" -->", false),
        "-[/y?A<]"
    );
    assert_eq!(
        render("<!--#block name=\"s\" -->STUB<!--#echo var=\"a\" --><!--#endblock --><!--#include virtual=\"/missing\" stub=\"s\" -->.", false),
        "STUBA&lt;."
    );
    assert_eq!(
        render("<!--#include virtual=\"/deep\" -->.", false),
        format!("{ERRMSG}.")
    );
    assert_eq!(
        render("<!--#include virtual=\"/../etc/passwd\" -->.", false),
        format!("{ERRMSG}.")
    );
}
