//! [`SsiBody`]: the filtered body, and the commands it runs.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

use super::parse::{Command, Event, Parser};
use super::{encode, split_include, Encoding, Env, Settings, SubFuture, ERRMSG, TIMEFMT};
use crate::http::body::Body;

/// Most bytes an `include ... set=` keeps (nginx's `subrequest_output_buffer_size` on 64-bit
/// platforms); a longer answer is an error and leaves the variable unset.
const SET_LIMIT: usize = 8192;

/// nginx's `if` state: inside none, after `if`/`elif`, after `else`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cond {
    None,
    If,
    Else,
}

/// What the commands so far decided.
struct Ctx {
    settings: Settings,
    errmsg: String,
    timefmt: String,
    encoding: Encoding,
    vars: Vec<(String, String)>,
    output: bool,
    chosen: bool,
    cond: Cond,
    /// The block being defined: its name and text.
    block: Option<(String, Vec<Bytes>)>,
    blocks: Vec<(String, Vec<Bytes>)>,
}

/// Includes started ahead of the one being sent, at most (nginx starts them all).
const AHEAD_INCLUDES: usize = 16;
/// Text kept behind an include being sent, at most, before the page waits for it.
const AHEAD_BYTES: usize = 64 * 1024;

/// An include's answer, on its way or arrived.
struct Answer {
    fut: Option<SubFuture>,
    ready: Option<(u16, Body)>,
}

impl Answer {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if let Some(f) = self.fut.as_mut() {
            let a = std::task::ready!(f.as_mut().poll(cx));
            self.ready = Some(a);
            self.fut = None;
        }
        Poll::Ready(())
    }
}

/// What the page sends next, in order.
enum Piece {
    Data(Bytes),
    Include {
        answer: Answer,
        set: Option<String>,
        stub: Option<String>,
        /// `wait=yes` or `set=`: nothing after it runs until it is done.
        blocking: bool,
    },
}

/// An include being answered.
enum Current {
    Waiting {
        answer: Answer,
        set: Option<String>,
        stub: Option<String>,
        blocking: bool,
    },
    Streaming {
        body: Body,
        stub: Option<String>,
        any: bool,
        blocking: bool,
    },
    Collecting {
        body: Body,
        var: String,
        buf: Vec<u8>,
    },
}

/// A response body with its SSI commands run.
pub struct SsiBody {
    inner: Body,
    inner_done: bool,
    parser: Parser,
    events: VecDeque<Event>,
    scratch: Vec<Event>,
    out: VecDeque<Piece>,
    current: Option<Current>,
    /// The source's error, met while reading ahead.
    failed: Option<std::io::Error>,
    env: Arc<dyn Env>,
    ctx: Ctx,
}

impl SsiBody {
    /// `inner` filtered, for the request `env`.
    pub fn new(inner: Body, env: Arc<dyn Env>, settings: Settings) -> Self {
        SsiBody {
            inner,
            inner_done: false,
            parser: Parser::new(settings.value_length),
            events: VecDeque::new(),
            scratch: Vec::new(),
            out: VecDeque::new(),
            current: None,
            failed: None,
            env,
            ctx: Ctx {
                settings,
                errmsg: ERRMSG.to_string(),
                timefmt: TIMEFMT.to_string(),
                encoding: Encoding::Entity,
                vars: Vec::new(),
                output: true,
                chosen: false,
                cond: Cond::None,
                block: None,
                blocks: Vec::new(),
            },
        }
    }

    fn error(&mut self, why: &str) {
        crate::fblog!(Error, "{why} while sending response to client");
        if !self.ctx.settings.silent_errors {
            self.out
                .push_back(Piece::Data(Bytes::from(self.ctx.errmsg.clone())));
        }
    }

    fn emit(&mut self, b: Bytes) {
        if b.is_empty() {
            return;
        }
        if let Some((_, text)) = self.ctx.block.as_mut() {
            text.push(b);
        } else if self.ctx.output {
            self.out.push_back(Piece::Data(b));
        }
    }

    fn event(&mut self, e: Event) {
        match e {
            Event::Text(t) => self.emit(t),
            Event::Error(why) => {
                if self.ctx.output && self.ctx.block.is_none() {
                    self.error(why)
                }
            }
            // A block keeps its commands as text (nginx writes them back), run when a stub
            // shows it.
            Event::Command(c) if self.ctx.block.is_some() && c.name != "endblock" => {
                let mut t = format!("<!--#{}", c.name);
                for (n, v) in &c.params {
                    t.push_str(&format!(" {n}=\"{v}\""));
                }
                t.push_str(" -->");
                self.emit(Bytes::from(t));
            }
            Event::Command(c) => {
                if let Err(why) = self.command(c) {
                    self.error(&why);
                }
            }
        }
    }

    /// The value of `$name`: the commands' own variables first, then the request's.
    fn var(&self, name: &str) -> Option<String> {
        let name = name.to_ascii_lowercase();
        if let Some((_, v)) = self.ctx.vars.iter().rev().find(|(n, _)| *n == name) {
            return Some(v.clone());
        }
        match name.as_str() {
            "date_local" | "date_gmt" => {
                let now = i64::try_from(crate::log::now().secs).unwrap_or(0);
                Some(super::format_time(
                    now,
                    &self.ctx.timefmt,
                    name == "date_gmt",
                ))
            }
            _ => self.env.var(&name),
        }
    }

    fn set_var(&mut self, name: &str, value: String) {
        let name = name.to_ascii_lowercase();
        match self.ctx.vars.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.ctx.vars.push((name, value)),
        }
    }

    /// nginx's `ngx_http_ssi_evaluate_string`: `$name` and `${name}` replaced, `\` quoting
    /// the next `\`, `'`, `"` or `$`; `prefix`: a relative path gets the `$uri`'s directory.
    fn evaluate(&self, text: &str, prefix: bool) -> Result<String, String> {
        let b = text.as_bytes();
        let mut out: Vec<u8> = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'$' {
                i += 1;
                let bracket = b.get(i) == Some(&b'{');
                if bracket {
                    i += 1;
                }
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let name = &text[start..i];
                if bracket {
                    if b.get(i) != Some(&b'}') {
                        return Err(format!(
                            "the closing bracket in \"{name}\" variable is missing"
                        ));
                    }
                    i += 1;
                }
                if name.is_empty() {
                    return Err(format!("invalid variable name in \"{text}\""));
                }
                if let Some(v) = self.var(name) {
                    out.extend_from_slice(v.as_bytes());
                }
            } else if b[i] == b'\\' && i + 1 < b.len() {
                let c = b[i + 1];
                if !matches!(c, b'\\' | b'\'' | b'"' | b'$') {
                    out.push(b'\\');
                }
                out.push(c);
                i += 2;
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        let mut s = String::from_utf8_lossy(&out).into_owned();
        if prefix && !s.is_empty() && !s.starts_with('/') {
            let uri = self.env.uri();
            let dir = &uri[..uri.rfind('/').map_or(0, |p| p + 1)];
            s.insert_str(0, dir);
        }
        Ok(s)
    }

    fn command(&mut self, c: Command) -> Result<(), String> {
        let name = c.name.as_str();
        // Inside a block only its end counts; the rest is the block's text.
        if self.ctx.block.is_some() {
            if name == "endblock" {
                if let Some(b) = self.ctx.block.take() {
                    self.ctx.blocks.push(b);
                }
            }
            return Ok(());
        }
        let conditional = matches!(name, "if" | "elif" | "else" | "endif");
        if !self.ctx.output && !conditional {
            return Ok(());
        }
        let allowed: &[&str] = match name {
            "echo" => &["var", "default", "encoding"],
            "set" => &["var", "value"],
            "if" | "elif" => &["expr"],
            "else" | "endif" | "endblock" => &[],
            "config" => &["errmsg", "timefmt"],
            "include" => &["virtual", "file", "wait", "set", "stub"],
            "block" => &["name"],
            _ => return Err(format!("invalid SSI command: \"{name}\"")),
        };
        if let Some((p, _)) = c
            .params
            .iter()
            .find(|(p, _)| !allowed.contains(&p.as_str()))
        {
            return Err(format!(
                "invalid parameter name: \"{p}\" in SSI command \"{name}\""
            ));
        }
        let need = |p: &str| {
            c.param(p)
                .ok_or_else(|| format!("no parameter \"{p}\" in SSI command \"{name}\""))
        };
        match name {
            "echo" => {
                let var = need("var")?;
                let value = match self.var(var) {
                    Some(v) => v,
                    None => match c.param("default") {
                        Some(d) => self.evaluate(d, false)?,
                        None => "(none)".to_string(),
                    },
                };
                if let Some(e) = c.param("encoding") {
                    match e {
                        "none" => self.ctx.encoding = Encoding::None,
                        "url" => self.ctx.encoding = Encoding::Url,
                        "entity" => self.ctx.encoding = Encoding::Entity,
                        _ => {
                            crate::fblog!(Error, "unknown encoding \"{e}\" in the \"echo\" command")
                        }
                    }
                }
                let v = encode(&value, self.ctx.encoding);
                self.emit(Bytes::from(v));
            }
            "set" => {
                let var = need("var")?.to_string();
                let value = self.evaluate(need("value")?, false)?;
                self.set_var(&var, value);
            }
            "config" => {
                if let Some(m) = c.param("errmsg") {
                    self.ctx.errmsg = m.to_string();
                }
                if let Some(t) = c.param("timefmt") {
                    self.ctx.timefmt = t.to_string();
                }
            }
            "if" | "elif" => {
                let expr = need("expr")?.to_string();
                if name == "if" && self.ctx.cond != Cond::None {
                    return Err("the \"if\" command inside the \"if\" command".into());
                }
                if name == "elif" && self.ctx.cond != Cond::If {
                    return Err("the \"elif\" command without \"if\"".into());
                }
                self.ctx.cond = Cond::If;
                if self.ctx.chosen {
                    self.ctx.output = false;
                    return Ok(());
                }
                let yes = self.condition(&expr)?;
                self.ctx.output = yes;
                self.ctx.chosen = yes;
            }
            "else" => {
                if self.ctx.cond != Cond::If {
                    return Err("the \"else\" command without \"if\"".into());
                }
                self.ctx.output = !self.ctx.chosen;
                self.ctx.cond = Cond::Else;
            }
            "endif" => {
                if self.ctx.cond == Cond::None {
                    return Err("the \"endif\" command without \"if\"".into());
                }
                self.ctx.output = true;
                self.ctx.chosen = false;
                self.ctx.cond = Cond::None;
            }
            "block" => {
                let n = need("name")?.to_string();
                self.ctx.block = Some((n, Vec::new()));
            }
            "endblock" => {}
            "include" => self.include(&c)?,
            _ => {}
        }
        Ok(())
    }

    /// nginx's `if expr=`: `LEFT` (true when not empty), `LEFT = RIGHT`, `LEFT != RIGHT`,
    /// RIGHT a string or `/regex/` (its captures become `$1`.. and named variables).
    fn condition(&mut self, expr: &str) -> Result<bool, String> {
        let end = expr
            .bytes()
            .position(|b| {
                !(b.is_ascii_alphanumeric()
                    || matches!(b, b'$' | b'{' | b'}' | b'_' | b'"' | b'\''))
            })
            .unwrap_or(expr.len());
        let left = self.evaluate(&expr[..end].to_ascii_lowercase(), false)?;
        let rest = expr[end..].trim_start_matches(' ');
        if rest.is_empty() {
            return Ok(!left.is_empty());
        }
        let (negative, rest) = if let Some(r) = rest.strip_prefix("!=") {
            (true, r)
        } else if let Some(r) = rest.strip_prefix('=') {
            (false, r)
        } else {
            return Err(format!("invalid expression in \"{expr}\""));
        };
        let rest = rest.trim_start_matches(' ');
        let matched = if rest.len() >= 2 && rest.starts_with('/') {
            let Some(re) = rest[1..].strip_suffix('/') else {
                return Err(format!("invalid expression in \"{expr}\""));
            };
            let re = self.evaluate(re, false)?;
            let re = regex::RegexBuilder::new(&re)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| format!("invalid regex in \"{expr}\": {e}"))?;
            match re.captures(&left) {
                Some(caps) => {
                    for (i, name) in re.capture_names().enumerate() {
                        let v = caps.get(i).map_or("", |m| m.as_str()).to_string();
                        self.set_var(&i.to_string(), v.clone());
                        if let Some(n) = name {
                            self.set_var(n, v);
                        }
                    }
                    true
                }
                None => false,
            }
        } else {
            let right = rest
                .strip_prefix("\\/")
                .map_or(rest.to_string(), |r| format!("/{r}"));
            left == self.evaluate(&right, false)?
        };
        Ok(matched != negative)
    }

    fn include(&mut self, c: &Command) -> Result<(), String> {
        let target = match (c.param("virtual"), c.param("file")) {
            (Some(_), Some(_)) => {
                return Err("\"virtual\" and \"file\" parameters in \"include\" command".into())
            }
            (Some(u), None) | (None, Some(u)) => u.to_string(),
            (None, None) => return Err("no parameter in \"include\" SSI command".into()),
        };
        if let Some(w) = c.param("wait") {
            if w != "yes" && w != "no" {
                return Err(format!("invalid value \"{w}\" for \"wait\" parameter"));
            }
        }
        let stub = c.param("stub").map(str::to_string);
        if let Some(s) = &stub {
            if !self.ctx.blocks.iter().any(|(n, _)| n == s) {
                return Err(format!("\"{s}\" SSI block is not defined"));
            }
        }
        let uri = self.evaluate(&target, true)?;
        let (path, args) = split_include(&uri).map_err(|e| format!("{e} \"{uri}\""))?;
        let fut = self.env.include(path, args).map_err(str::to_string)?;
        let set = c.param("set").map(str::to_string);
        self.out.push_back(Piece::Include {
            answer: Answer {
                fut: Some(fut),
                ready: None,
            },
            blocking: set.is_some() || c.param("wait") == Some("yes"),
            set,
            stub,
        });
        Ok(())
    }

    /// Shows the block `name`: its text with its commands run (in a filter of its own).
    fn stub(&mut self, name: &str) {
        if let Some((_, text)) = self.ctx.blocks.iter().find(|(n, _)| n == name) {
            let text: Vec<u8> = text.iter().flat_map(|b| b.iter().copied()).collect();
            let inner = SsiBody::new(
                Body::full(text),
                self.env.clone(),
                self.ctx.settings.clone(),
            );
            self.current = Some(Current::Streaming {
                body: Body::Stream(crate::http::body::BoxBody::new(inner)),
                stub: None,
                any: true,
                blocking: true,
            });
        }
    }

    /// Drives the include under way; Ready(Some) with bytes to send, Ready(None) when it is
    /// done, Pending while it waits.
    fn poll_current(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        use http_body::Body as _;
        loop {
            let Some(cur) = self.current.as_mut() else {
                return Poll::Ready(None);
            };
            match cur {
                Current::Waiting {
                    answer,
                    set,
                    stub,
                    blocking,
                } => {
                    std::task::ready!(answer.poll(cx));
                    let (status, body) = answer.ready.take().unwrap_or((500, Body::Empty));
                    let (set, stub, blocking) = (set.take(), stub.take(), *blocking);
                    self.current = None;
                    if let Some(var) = set {
                        self.current = Some(Current::Collecting {
                            body,
                            var,
                            buf: Vec::new(),
                        });
                    } else if status >= 400 && stub.is_some() {
                        self.stub(stub.as_deref().unwrap_or_default());
                    } else {
                        self.current = Some(Current::Streaming {
                            body,
                            stub,
                            any: false,
                            blocking,
                        });
                    }
                }
                Current::Streaming {
                    body, stub, any, ..
                } => match std::task::ready!(Pin::new(body).poll_frame(cx)) {
                    Some(Ok(f)) => {
                        if let Ok(d) = f.into_data() {
                            if !d.is_empty() {
                                *any = true;
                                return Poll::Ready(Some(d));
                            }
                        }
                    }
                    Some(Err(e)) => {
                        self.current = None;
                        crate::fblog!(Error, "SSI include failed: {e}");
                        return Poll::Ready(None);
                    }
                    None => {
                        let stub = if *any { None } else { stub.take() };
                        self.current = None;
                        if let Some(s) = stub {
                            self.stub(&s);
                        }
                    }
                },
                Current::Collecting { body, var, buf } => {
                    match std::task::ready!(Pin::new(body).poll_frame(cx)) {
                        Some(Ok(f)) => {
                            if let Ok(d) = f.into_data() {
                                if buf.len() + d.len() > SET_LIMIT {
                                    self.current = None;
                                    self.error("too big subrequest response");
                                    return Poll::Ready(None);
                                }
                                buf.extend_from_slice(&d);
                            }
                        }
                        Some(Err(e)) => {
                            self.current = None;
                            crate::fblog!(Error, "SSI include failed: {e}");
                            return Poll::Ready(None);
                        }
                        None => {
                            let (var, v) = (var.clone(), String::from_utf8_lossy(buf).into_owned());
                            self.current = None;
                            self.set_var(&var, v);
                            return Poll::Ready(None);
                        }
                    }
                }
            }
        }
    }
}

/// What one step of reading the page did.
enum Step {
    Progress,
    Pending,
    Done,
}

impl SsiBody {
    /// Whether an include that the rest of the page waits for is not done.
    fn blocked(&self) -> bool {
        matches!(
            self.current,
            Some(Current::Waiting { blocking: true, .. })
                | Some(Current::Streaming { blocking: true, .. })
                | Some(Current::Collecting { .. })
        ) || self
            .out
            .iter()
            .any(|p| matches!(p, Piece::Include { blocking: true, .. }))
    }

    /// Runs the next command or reads the next chunk of the page.
    fn advance(&mut self, cx: &mut Context<'_>) -> Step {
        use http_body::Body as _;
        if let Some(e) = self.events.pop_front() {
            self.event(e);
            return Step::Progress;
        }
        if self.inner_done {
            return Step::Done;
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Pending => Step::Pending,
            Poll::Ready(Some(Ok(f))) => {
                if let Ok(d) = f.into_data() {
                    self.parser.feed(&d, &mut self.scratch);
                    self.events.extend(self.scratch.drain(..));
                }
                Step::Progress
            }
            Poll::Ready(Some(Err(e))) => {
                self.inner_done = true;
                self.failed = Some(e);
                Step::Progress
            }
            Poll::Ready(None) => {
                self.inner_done = true;
                self.parser.finish(&mut self.scratch);
                self.events.extend(self.scratch.drain(..));
                Step::Progress
            }
        }
    }

    /// While the include being sent waits: the includes after it are started and the page
    /// read on, within bounds. Whether anything moved.
    fn look_ahead(&mut self, cx: &mut Context<'_>) -> bool {
        let mut moved = false;
        let (mut includes, mut bytes) = (0, 0);
        for p in self.out.iter_mut() {
            match p {
                Piece::Data(b) => bytes += b.len(),
                Piece::Include { answer, .. } => {
                    includes += 1;
                    if answer.fut.is_some() && answer.poll(cx).is_ready() {
                        moved = true;
                    }
                }
            }
        }
        if self.blocked() || includes >= AHEAD_INCLUDES || bytes >= AHEAD_BYTES {
            return moved;
        }
        matches!(self.advance(cx), Step::Progress) || moved
    }
}

impl http_body::Body for SsiBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        loop {
            if this.current.is_some() {
                match this.poll_current(cx) {
                    Poll::Ready(Some(b)) => return Poll::Ready(Some(Ok(Frame::data(b)))),
                    Poll::Ready(None) => continue,
                    Poll::Pending => {
                        if this.look_ahead(cx) {
                            continue;
                        }
                        return Poll::Pending;
                    }
                }
            }
            match this.out.pop_front() {
                Some(Piece::Data(b)) => return Poll::Ready(Some(Ok(Frame::data(b)))),
                Some(Piece::Include {
                    answer,
                    set,
                    stub,
                    blocking,
                }) => {
                    this.current = Some(Current::Waiting {
                        answer,
                        set,
                        stub,
                        blocking,
                    });
                    continue;
                }
                None => {}
            }
            if let Some(e) = this.failed.take() {
                return Poll::Ready(Some(Err(e)));
            }
            match this.advance(cx) {
                Step::Progress => continue,
                Step::Pending => return Poll::Pending,
                Step::Done => return Poll::Ready(None),
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
