//! `charset_map SRC DST { HEX HEX; ... }`: nginx's 8-bit recoding tables, and the check that
//! every location recoding `source_charset` to `charset` has one (nginx's
//! `ngx_http_charset_postconfiguration`).
//!
//! A table starts as nginx's: bytes below 0x80 map to themselves, the others to `?`; each line
//! maps one byte of SRC to one byte of DST, and the reverse table is filled at the same time,
//! so one block recodes both ways. Maps to `utf-8` (multi-byte values) are refused with a clear
//! error: firstbyte does not recode to or from UTF-8.

use std::collections::HashMap;
use std::sync::Arc;

use super::cx::Cx;
use super::error::ConfError;
use super::parse::Directive;

/// A 256-byte recoding table.
#[derive(Clone, PartialEq, Eq)]
pub struct Recode(Arc<[u8; 256]>);

impl std::fmt::Debug for Recode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recode")
    }
}

impl Recode {
    /// Recodes `buf` in place.
    pub fn apply(&self, buf: &mut [u8]) {
        for b in buf {
            *b = self.0[usize::from(*b)];
        }
    }
}

/// Every `charset_map` of the `http` block, by (source, destination) lower-cased, both ways.
#[derive(Debug, Clone, Default)]
pub struct CharsetMaps {
    tables: HashMap<(String, String), Recode>,
}

impl CharsetMaps {
    /// The table recoding `src` to `dst` (names compared without case), if one was given.
    pub fn get(&self, src: &str, dst: &str) -> Option<&Recode> {
        if self.tables.is_empty() {
            return None;
        }
        self.tables
            .get(&(src.to_ascii_lowercase(), dst.to_ascii_lowercase()))
    }
}

impl CharsetMaps {
    /// Whether a `charset_map` names `name` (either side, without case).
    pub fn knows(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        self.tables.keys().any(|(s, d)| *s == name || *d == name)
    }
}

/// A byte in hex, as `ngx_hextoi` reads it (0..=255).
fn hex_byte(s: &str) -> Option<u8> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u8::from_str_radix(s.trim_start_matches('0'), 16)
        .ok()
        .or_else(|| s.bytes().all(|b| b == b'0').then_some(0))
}

/// `charset_map SRC DST { ... }` (http level).
pub(crate) fn charset_map(cx: &mut Cx, d: &Directive) -> Result<(), ConfError> {
    let (src, dst) = (&d.args[0], &d.args[1]);
    let (s, t) = (src.to_ascii_lowercase(), dst.to_ascii_lowercase());
    if s == t {
        return Err(ConfError::other(
            format!("\"charset_map\" between the same charsets \"{src}\" and \"{dst}\""),
            &d.pos,
        ));
    }
    if s == "utf-8" {
        return Err(ConfError::other(
            "\"charset_map\" with \"utf-8\" charset should be given in the second column",
            &d.pos,
        ));
    }
    if t == "utf-8" {
        return Err(ConfError::other(
            "\"charset_map\" to \"utf-8\" is not supported by firstbyte yet (8-bit maps only)",
            &d.pos,
        ));
    }
    let maps = Arc::make_mut(&mut cx.charsets);
    if maps.tables.contains_key(&(s.clone(), t.clone())) {
        return Err(ConfError::other(
            format!("duplicate \"charset_map\" between \"{src}\" and \"{dst}\""),
            &d.pos,
        ));
    }
    let mut fwd = [b'?'; 256];
    let mut back = [b'?'; 256];
    for i in 0..128u8 {
        fwd[usize::from(i)] = i;
        back[usize::from(i)] = i;
    }
    for line in d.block.as_deref().unwrap_or_default() {
        if line.block.is_some() || line.args.len() != 1 {
            return Err(ConfError::other("invalid parameters number", &line.pos));
        }
        let invalid = |v: &str| ConfError::other(format!("invalid value \"{v}\""), &line.pos);
        let a = hex_byte(&line.name).ok_or_else(|| invalid(&line.name))?;
        let b = hex_byte(&line.args[0]).ok_or_else(|| invalid(&line.args[0]))?;
        fwd[usize::from(a)] = b;
        back[usize::from(b)] = a;
    }
    maps.tables
        .insert((s.clone(), t.clone()), Recode(Arc::new(fwd)));
    maps.tables.insert((t, s), Recode(Arc::new(back)));
    Ok(())
}

/// nginx's check at the end of `http {}`: a location that recodes (`source_charset` and
/// `charset` both set, and different) needs a `charset_map` between the two.
pub(crate) fn check(
    maps: &CharsetMaps,
    charset: Option<&str>,
    source: Option<&str>,
    pos: &super::model::Pos,
) -> Result<(), ConfError> {
    let (Some(dst), Some(src)) = (charset, source) else {
        return Ok(());
    };
    if dst.eq_ignore_ascii_case(src) || maps.get(src, dst).is_some() {
        return Ok(());
    }
    Err(ConfError::other(
        format!("no \"charset_map\" between the charsets \"{src}\" and \"{dst}\""),
        pos,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_bytes() {
        assert_eq!(hex_byte("58"), Some(0x58));
        assert_eq!(hex_byte("ff"), Some(0xff));
        assert_eq!(hex_byte("00"), Some(0));
        assert_eq!(hex_byte("0"), Some(0));
        assert_eq!(hex_byte("100"), None);
        assert_eq!(hex_byte("0x1"), None);
        assert_eq!(hex_byte(""), None);
        assert_eq!(hex_byte("D0B0"), None);
    }

    fn maps(conf: &str) -> Result<Arc<CharsetMaps>, ConfError> {
        let c = crate::conf::testutil::load_as(conf, true)?;
        let s = &c.http.as_ref().unwrap().servers[0];
        Ok(s.default_location.charsets.clone())
    }

    fn err(conf: &str) -> String {
        maps(conf).unwrap_err().to_string()
    }

    #[test]
    fn tables_recode_both_ways() {
        let conf = "http { server { listen 127.0.0.1:8080; } charset_map B A { 58 59; C8 E0; } }";
        let maps = maps(conf).unwrap();
        let fwd = maps.get("b", "A").unwrap();
        let mut buf = *b"XaX\xc8\xc9";
        fwd.apply(&mut buf);
        assert_eq!(&buf, b"YaY\xe0?");
        let mut buf = *b"Y\xe0\xc8";
        maps.get("A", "B").unwrap().apply(&mut buf);
        assert_eq!(&buf, b"X\xc8?");
        assert!(maps.get("A", "C").is_none());
    }

    #[test]
    fn bad_maps_are_emerg() {
        let srv = "server { listen 127.0.0.1:8080; }";
        let e = err(&format!("http {{ charset_map a A {{ }} {srv} }}"));
        assert!(e.contains("between the same charsets"), "{e}");
        let e = err(&format!("http {{ charset_map utf-8 A {{ }} {srv} }}"));
        assert!(e.contains("second column"), "{e}");
        let e = err(&format!("http {{ charset_map A utf-8 {{ }} {srv} }}"));
        assert!(e.contains("not supported"), "{e}");
        let e = err(&format!(
            "http {{ charset_map A B {{ }} charset_map b a {{ }} {srv} }}"
        ));
        assert!(e.contains("duplicate \"charset_map\""), "{e}");
        let e = err(&format!("http {{ charset_map A B {{ 1G 20; }} {srv} }}"));
        assert!(
            e.contains("invalid value \"1G\"") && e.contains("x.conf:1"),
            "{e}"
        );
        let e = err(&format!("http {{ charset_map A B {{ 10 20 30; }} {srv} }}"));
        assert!(e.contains("invalid parameters number"), "{e}");
        let e = err(&format!("http {{ charset_map A B {{ 10 100; }} {srv} }}"));
        assert!(e.contains("invalid value \"100\""), "{e}");
    }

    #[test]
    fn a_recoding_location_needs_a_map() {
        let e = err("http { server { listen 127.0.0.1:8080; location / { charset A; source_charset B; } } }");
        assert!(
            e.contains("no \"charset_map\" between the charsets \"B\" and \"A\""),
            "{e}"
        );
        // Either direction serves; the map may come after the servers; same names need none.
        maps("http { server { listen 127.0.0.1:8080; location / { charset A; source_charset B; } } charset_map A B { } }").unwrap();
        maps("http { server { listen 127.0.0.1:8080; charset a; source_charset A; } }").unwrap();
        // `charset` alone (no recoding) needs no map.
        maps("http { charset koi8-r; server { listen 127.0.0.1:8080; } }").unwrap();
    }
}
