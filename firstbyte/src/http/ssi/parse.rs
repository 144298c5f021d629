//! The SSI command parser: a state machine over the body's chunks as they pass.
//!
//! Text outside `<!--#...-->` comes out as slices of the chunks it arrived in (no copy); a
//! command as its name and parameters. Nothing is buffered but the command being read, and
//! that is bounded: a name of 32 bytes, 16 parameters, each parameter's name 32 bytes and its
//! value `ssi_value_length` bytes (nginx's limits). A command that breaks them, or any other
//! malformed one, is an [`Event::Error`] and the parser skips to its `-->`.

use bytes::Bytes;

/// nginx's NGX_HTTP_SSI_COMMAND_LEN and NGX_HTTP_SSI_PARAM_LEN.
const NAME_LEN: usize = 32;
/// nginx's NGX_HTTP_SSI_MAX_PARAMS.
const MAX_PARAMS: usize = 16;
const START: &[u8] = b"<!--#";

/// One command: `<!--#name p1="v1" p2='v2' -->`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Command {
    /// Lower-case.
    pub name: String,
    /// Names lower-case, values as written (quotes off).
    pub params: Vec<(String, String)>,
}

impl Command {
    /// The value of parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the parser found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Bytes to pass on.
    Text(Bytes),
    /// A complete command.
    Command(Command),
    /// A malformed or oversized command (skipped), or one the body ended inside.
    Error(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Text,
    /// Matched this many bytes of `<!--#`.
    Start(usize),
    PreCommand,
    Command,
    PreParam,
    Param,
    PreEqual,
    PreValue,
    Value(u8),
    /// After a `\` inside a value quoted by this byte.
    Escaped(u8),
    PostValue,
    /// Seen `-` (1) or `--` (2) of the closing `-->`.
    End(u8),
    /// Skipping a bad command up to its `-->`; how many `-` were just seen.
    Skip(u8),
}

/// The parser; `value_len` is `ssi_value_length`.
#[derive(Debug)]
pub struct Parser {
    state: State,
    value_len: usize,
    cmd: Command,
    name: Vec<u8>,
    value: Vec<u8>,
}

impl Parser {
    /// A parser at the start of a body.
    pub fn new(value_len: usize) -> Self {
        Parser {
            state: State::Text,
            value_len,
            cmd: Command::default(),
            name: Vec::new(),
            value: Vec::new(),
        }
    }

    fn error(&mut self, out: &mut Vec<Event>, why: &'static str) {
        out.push(Event::Error(why));
        self.cmd = Command::default();
        self.name.clear();
        self.value.clear();
        self.state = State::Skip(0);
    }

    fn end_param(&mut self, out: &mut Vec<Event>) {
        if self.cmd.params.len() == MAX_PARAMS {
            return self.error(out, "too many SSI command parameters");
        }
        let n = String::from_utf8_lossy(&self.name).to_ascii_lowercase();
        let v = String::from_utf8_lossy(&self.value).into_owned();
        self.cmd.params.push((n, v));
        self.name.clear();
        self.value.clear();
        self.state = State::PostValue;
    }

    /// Feeds one chunk of the body; events are appended to `out`.
    pub fn feed(&mut self, chunk: &Bytes, out: &mut Vec<Event>) {
        let b = &chunk[..];
        let mut i = 0;
        while i < b.len() {
            if self.state == State::Text {
                match memchr::memchr(b'<', &b[i..]) {
                    None => {
                        out.push(Event::Text(chunk.slice(i..)));
                        return;
                    }
                    Some(at) => {
                        if at > 0 {
                            out.push(Event::Text(chunk.slice(i..i + at)));
                        }
                        i += at + 1;
                        self.state = State::Start(1);
                        continue;
                    }
                }
            }
            let c = b[i];
            i += 1;
            self.step(c, out);
        }
    }

    fn step(&mut self, c: u8, out: &mut Vec<Event>) {
        let ws = matches!(c, b' ' | b'\t' | b'\r' | b'\n');
        match self.state {
            // `feed` reads text itself.
            State::Text => {}
            State::Start(n) => {
                if c == START[n] {
                    self.state = if n + 1 == START.len() {
                        State::PreCommand
                    } else {
                        State::Start(n + 1)
                    };
                } else {
                    out.push(Event::Text(Bytes::from_static(&START[..n])));
                    if c == b'<' {
                        self.state = State::Start(1);
                    } else {
                        out.push(Event::Text(Bytes::copy_from_slice(&[c])));
                        self.state = State::Text;
                    }
                }
            }
            State::PreCommand => {
                if ws {
                    return;
                }
                if c == b'-' || c == b'"' || c == b'\'' || c == b'=' {
                    return self.error(out, "invalid SSI command");
                }
                self.name.push(c.to_ascii_lowercase());
                self.state = State::Command;
            }
            State::Command => {
                if ws {
                    self.end_command_name();
                    self.state = State::PreParam;
                } else if c == b'-' {
                    self.end_command_name();
                    self.state = State::End(1);
                } else if self.name.len() == NAME_LEN {
                    self.error(out, "too long SSI command")
                } else {
                    self.name.push(c.to_ascii_lowercase());
                }
            }
            State::PreParam => {
                if ws {
                    return;
                }
                if c == b'-' {
                    self.state = State::End(1);
                } else if c == b'=' || c == b'"' || c == b'\'' {
                    self.error(out, "invalid SSI parameter")
                } else {
                    self.name.push(c);
                    self.state = State::Param;
                }
            }
            State::Param => {
                if ws {
                    self.state = State::PreEqual;
                } else if c == b'=' {
                    self.state = State::PreValue;
                } else if c == b'-' || c == b'"' || c == b'\'' {
                    self.error(out, "invalid SSI parameter")
                } else if self.name.len() == NAME_LEN {
                    self.error(out, "too long SSI parameter name")
                } else {
                    self.name.push(c);
                }
            }
            State::PreEqual => {
                if c == b'=' {
                    self.state = State::PreValue;
                } else if !ws {
                    self.error(out, "invalid SSI parameter")
                }
            }
            State::PreValue => {
                if c == b'"' || c == b'\'' {
                    self.state = State::Value(c);
                } else if !ws {
                    self.error(out, "invalid SSI parameter value")
                }
            }
            State::Value(q) | State::Escaped(q) => {
                if self.state == State::Value(q) && c == q {
                    return self.end_param(out);
                }
                if self.value.len() >= self.value_len {
                    return self.error(out, "too long SSI parameter value");
                }
                self.value.push(c);
                self.state = if self.state == State::Value(q) && c == b'\\' {
                    State::Escaped(q)
                } else {
                    State::Value(q)
                };
            }
            State::PostValue => {
                if ws {
                    self.state = State::PreParam;
                } else if c == b'-' {
                    self.state = State::End(1);
                } else {
                    self.error(out, "invalid SSI parameter")
                }
            }
            State::End(1) => {
                if c == b'-' {
                    self.state = State::End(2);
                } else {
                    self.error(out, "invalid SSI command end")
                }
            }
            State::End(_) => {
                if c == b'>' {
                    out.push(Event::Command(std::mem::take(&mut self.cmd)));
                    self.state = State::Text;
                } else {
                    self.error(out, "invalid SSI command end")
                }
            }
            State::Skip(n) => {
                self.state = match (c, n) {
                    (b'-', n) => State::Skip((n + 1).min(2)),
                    (b'>', 2) => State::Text,
                    _ => State::Skip(0),
                };
            }
        }
    }

    fn end_command_name(&mut self) {
        self.cmd.name = String::from_utf8_lossy(&self.name).into_owned();
        self.name.clear();
    }

    /// The body ended: a partial `<!--#` is text; a command left open is an error.
    pub fn finish(&mut self, out: &mut Vec<Event>) {
        match self.state {
            State::Text => {}
            State::Start(n) => out.push(Event::Text(Bytes::from_static(&START[..n]))),
            State::Skip(_) => {}
            _ => out.push(Event::Error("unexpected end of body in SSI command")),
        }
        self.state = State::Text;
        self.cmd = Command::default();
        self.name.clear();
        self.value.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `input` fed in two pieces split at `at`, text pieces joined.
    fn run(input: &[u8], split: &[usize], value_len: usize) -> Vec<Event> {
        let mut p = Parser::new(value_len);
        let mut out = Vec::new();
        let mut last = 0;
        for &s in split.iter().chain(std::iter::once(&input.len())) {
            p.feed(&Bytes::copy_from_slice(&input[last..s]), &mut out);
            last = s;
        }
        p.finish(&mut out);
        let mut joined: Vec<Event> = Vec::new();
        for e in out {
            match (joined.last_mut(), e) {
                (Some(Event::Text(a)), Event::Text(b)) => {
                    let mut v = a.to_vec();
                    v.extend_from_slice(&b);
                    *a = Bytes::from(v);
                }
                (_, e) => joined.push(e),
            }
        }
        joined
    }

    fn every_split(input: &[u8], value_len: usize) -> Vec<Event> {
        let whole = run(input, &[], value_len);
        for at in 0..=input.len() {
            assert_eq!(run(input, &[at], value_len), whole, "split at {at}");
        }
        let all: Vec<usize> = (1..input.len()).collect();
        assert_eq!(run(input, &all, value_len), whole, "byte by byte");
        whole
    }

    fn cmd(name: &str, params: &[(&str, &str)]) -> Event {
        Event::Command(Command {
            name: name.into(),
            params: params
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
        })
    }

    fn text(t: &str) -> Event {
        Event::Text(Bytes::copy_from_slice(t.as_bytes()))
    }

    #[test]
    fn commands_and_text_at_every_split() {
        let ev = every_split(
            b"a<b<!-- c --><!--#echo var=\"x\" default='d\\'q' -->z<!--#endif-->",
            256,
        );
        assert_eq!(
            ev,
            vec![
                text("a<b<!-- c -->"),
                cmd("echo", &[("var", "x"), ("default", "d\\'q")]),
                text("z"),
                cmd("endif", &[]),
            ]
        );
    }

    #[test]
    fn partial_start_at_end_is_text() {
        assert_eq!(every_split(b"x<!--", 256), vec![text("x<!--")]);
        assert_eq!(every_split(b"x<<!-!", 256), vec![text("x<<!-!")]);
    }

    #[test]
    fn unterminated_command_is_an_error() {
        assert_eq!(
            every_split(b"x<!--#echo var=\"a", 256),
            vec![
                text("x"),
                Event::Error("unexpected end of body in SSI command")
            ]
        );
    }

    #[test]
    fn long_value_is_refused_and_skipped() {
        let mut input = b"<!--#set var=\"a\" value=\"".to_vec();
        input.extend(std::iter::repeat_n(b'v', 300));
        input.extend_from_slice(b"\" -->after");
        let ev = every_split(&input, 256);
        assert_eq!(
            ev,
            vec![Event::Error("too long SSI parameter value"), text("after")]
        );
        // Within the bound it is a command.
        let ev = every_split(&input, 300);
        assert!(matches!(&ev[0], Event::Command(c) if c.param("value").map(str::len) == Some(300)));
    }

    #[test]
    fn too_many_params_and_long_names() {
        let mut input = b"<!--#x".to_vec();
        for i in 0..17 {
            input.extend_from_slice(format!(" p{i}=\"v\"").as_bytes());
        }
        input.extend_from_slice(b" -->t");
        assert_eq!(
            every_split(&input, 256),
            vec![Event::Error("too many SSI command parameters"), text("t")]
        );
        let mut long = b"<!--#".to_vec();
        long.extend(std::iter::repeat_n(b'c', 40));
        long.extend_from_slice(b" -->t");
        assert_eq!(
            every_split(&long, 256),
            vec![Event::Error("too long SSI command"), text("t")]
        );
    }

    #[test]
    fn garbage_never_panics() {
        // Every byte value in every state.
        let mut input = Vec::new();
        for b in 0..=255u8 {
            input.extend_from_slice(b"<!--#a b=\"");
            input.push(b);
            input.extend_from_slice(b"\"");
            input.push(b);
            input.extend_from_slice(b"<!--#");
            input.push(b);
        }
        let _ = run(&input, &[7, 100, 1000], 4);
    }
}
