//! HTTP Basic authentication as nginx's `auth_basic` module: the `Authorization` header's
//! user and password, the user's line in an htpasswd file, and the password checked against
//! the hash stored there.
//!
//! Schemes, as `ngx_crypt`: `{PLAIN}`, `{SHA}` (base64 SHA-1), `{SSHA}` (salted SHA-1),
//! `$apr1$` (Apache's MD5) are computed here; anything else goes to the C library's
//! `crypt(3)` as nginx does, so every form the system's libcrypt knows works: `$1$` MD5-crypt,
//! `$5$`/`$6$` SHA-crypt, `$2b$`/`$2y$` bcrypt, `$y$` yescrypt and traditional DES. The
//! stored and computed strings are compared in constant time.
//!
//! The file is read on every request, as nginx: an edit applies to the next request without
//! a reload.

use std::ffi::{c_char, c_int, c_void, CStr, CString};

use subtle::ConstantTimeEq;

/// The user and password of an `Authorization: Basic ...` header, as nginx's
/// `ngx_http_auth_basic_user`: `Basic` (any case) and a space, spaces, then base64 of
/// `user:password` with a non-empty user. None: no usable credentials (the client is asked).
pub fn credentials(header: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    const BASIC: &[u8] = b"basic ";
    if header.len() < BASIC.len() || !header[..BASIC.len()].eq_ignore_ascii_case(BASIC) {
        return None;
    }
    let mut rest = &header[BASIC.len()..];
    while let [b' ', tail @ ..] = rest {
        rest = tail;
    }
    if rest.is_empty() {
        return None;
    }
    let decoded = decode_base64(rest)?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    if colon == 0 {
        return None;
    }
    Some((decoded[..colon].to_vec(), decoded[colon + 1..].to_vec()))
}

/// The stored hash of `user` in an htpasswd file's bytes, as nginx reads it: lines
/// `user:hash[:anything]`; a line starting with `#` or CR is skipped, as is a line with no
/// colon; the hash ends at `:`, CR, LF or the end of the file. The first matching line wins.
pub fn find_user<'a>(file: &'a [u8], user: &[u8]) -> Option<&'a [u8]> {
    for line in file.split(|&b| b == b'\n') {
        if line.first().is_some_and(|&b| b == b'#' || b == b'\r') {
            continue;
        }
        let Some(rest) = line.strip_prefix(user) else {
            continue;
        };
        let Some(hash) = rest.strip_prefix(b":") else {
            continue;
        };
        let end = hash
            .iter()
            .position(|&b| b == b':' || b == b'\r')
            .unwrap_or(hash.len());
        return Some(&hash[..end]);
    }
    None
}

/// Why a password could not be checked (nginx answers 500).
#[derive(Debug, PartialEq, Eq)]
pub enum CryptError {
    /// The C library's `crypt` refused the stored setting.
    Crypt(String),
}

/// Whether `password` matches `stored` (a line's hash field), as `ngx_crypt` then `strcmp`:
/// the stored string is the salt; the password's hash under it must equal it.
pub fn verify(password: &[u8], stored: &[u8]) -> Result<bool, CryptError> {
    // nginx passes the password as a C string: it ends at a NUL byte.
    let password = match password.iter().position(|&b| b == 0) {
        Some(n) => &password[..n],
        None => password,
    };
    let computed = if stored.starts_with(b"$apr1$") {
        apr1(password, stored)
    } else if let Some(plain) = stored.strip_prefix(b"{PLAIN}") {
        return Ok(bool::from(plain.ct_eq(password)));
    } else if stored.starts_with(b"{SSHA}") {
        ssha(password, stored)
    } else if stored.starts_with(b"{SHA}") {
        let digest = sha1(&[password]);
        let mut out = b"{SHA}".to_vec();
        out.extend_from_slice(encode_base64(&digest).as_bytes());
        out
    } else {
        libc_crypt(password, stored)?
    };
    Ok(bool::from(computed.as_slice().ct_eq(stored)))
}

fn sha1(parts: &[&[u8]]) -> Vec<u8> {
    let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY);
    for p in parts {
        ctx.update(p);
    }
    ctx.finish().as_ref().to_vec()
}

/// `{SSHA}base64(SHA1(password salt) salt)`: the salt is what follows the first 20 decoded
/// bytes; a value that does not decode (or is shorter) has none, as nginx.
fn ssha(password: &[u8], stored: &[u8]) -> Vec<u8> {
    let salt = match decode_base64(&stored[b"{SSHA}".len()..]) {
        Some(d) if d.len() >= 20 => d[20..].to_vec(),
        _ => Vec::new(),
    };
    let mut raw = sha1(&[password, &salt]);
    raw.extend_from_slice(&salt);
    let mut out = b"{SSHA}".to_vec();
    out.extend_from_slice(encode_base64(&raw).as_bytes());
    out
}

/// Apache's apr1: Poul-Henning Kamp's MD5-crypt with the `$apr1$` magic (`ngx_crypt_apr1`).
fn apr1(password: &[u8], stored: &[u8]) -> Vec<u8> {
    use md5::{Digest, Md5};
    const MAGIC: &[u8] = b"$apr1$";
    let rest = &stored[MAGIC.len()..];
    let salt_len = rest
        .iter()
        .take(8)
        .position(|&b| b == b'$')
        .unwrap_or(rest.len().min(8));
    let salt = &rest[..salt_len];

    let mut md = Md5::new();
    md.update(password);
    md.update(MAGIC);
    md.update(salt);
    let mut alt = Md5::new();
    alt.update(password);
    alt.update(salt);
    alt.update(password);
    let mut fin: [u8; 16] = alt.finalize().into();
    let mut n = password.len();
    while n > 0 {
        md.update(&fin[..n.min(16)]);
        n = n.saturating_sub(16);
    }
    fin = [0; 16];
    let mut i = password.len();
    while i > 0 {
        if i & 1 == 1 {
            md.update(&fin[..1]);
        } else {
            md.update(&password[..1]);
        }
        i >>= 1;
    }
    fin = md.finalize().into();
    for i in 0..1000 {
        let mut c = Md5::new();
        if i & 1 == 1 {
            c.update(password);
        } else {
            c.update(fin);
        }
        if i % 3 != 0 {
            c.update(salt);
        }
        if i % 7 != 0 {
            c.update(password);
        }
        if i & 1 == 1 {
            c.update(fin);
        } else {
            c.update(password);
        }
        fin = c.finalize().into();
    }
    let mut out = Vec::with_capacity(MAGIC.len() + salt.len() + 23);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(salt);
    out.push(b'$');
    let f = |a: usize, b: usize, c: usize| {
        (u32::from(fin[a]) << 16) | (u32::from(fin[b]) << 8) | u32::from(fin[c])
    };
    to64(&mut out, f(0, 6, 12), 4);
    to64(&mut out, f(1, 7, 13), 4);
    to64(&mut out, f(2, 8, 14), 4);
    to64(&mut out, f(3, 9, 15), 4);
    to64(&mut out, f(4, 10, 5), 4);
    to64(&mut out, u32::from(fin[11]), 2);
    out
}

fn to64(out: &mut Vec<u8>, mut v: u32, n: usize) {
    const ITOA64: &[u8] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    for _ in 0..n {
        out.push(ITOA64[(v & 0x3f) as usize]);
        v >>= 6;
    }
}

// libxcrypt (the C library's crypt on every current Linux distribution): `crypt_rn` is the
// re-entrant form that takes the work area's size, so it cannot overrun it.
#[link(name = "crypt")]
extern "C" {
    fn crypt_rn(
        phrase: *const c_char,
        setting: *const c_char,
        data: *mut c_void,
        size: c_int,
    ) -> *mut c_char;
}

/// libxcrypt's `struct crypt_data` is 32768 bytes.
const CRYPT_DATA_SIZE: usize = 32768;

/// `crypt(3)` of `password` under `setting` (the stored hash), as `ngx_libc_crypt`. A
/// setting the library refuses (a broken or unknown hash) is an error.
fn libc_crypt(password: &[u8], setting: &[u8]) -> Result<Vec<u8>, CryptError> {
    let refuse = || CryptError::Crypt(String::from_utf8_lossy(setting).into_owned());
    // A NUL in the setting cannot be passed; such a line matches nothing.
    let setting_c = CString::new(setting).map_err(|_| refuse())?;
    let phrase = CString::new(password).map_err(|_| refuse())?;
    let mut data = vec![0u8; CRYPT_DATA_SIZE];
    // SAFETY: both strings are NUL-terminated and live across the call; `data` is a zeroed
    // work area of the size passed, which crypt_rn checks against its own struct size.
    let out = unsafe {
        crypt_rn(
            phrase.as_ptr(),
            setting_c.as_ptr(),
            data.as_mut_ptr().cast(),
            CRYPT_DATA_SIZE as c_int,
        )
    };
    if out.is_null() {
        return Err(refuse());
    }
    // SAFETY: a non-null result points at a NUL-terminated string inside `data`.
    let hash = unsafe { CStr::from_ptr(out) }.to_bytes().to_vec();
    // The password's bytes were copied into the work area: clear it.
    data.fill(0);
    std::hint::black_box(&data);
    Ok(hash)
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
fn encode_base64(src: &[u8]) -> String {
    let mut out = String::with_capacity(src.len().div_ceil(3) * 4);
    for c in src.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(B64[(n >> (18 - 6 * i) & 0x3f) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// nginx's `ngx_decode_base64`: stops at the first `=`, refuses other characters outside the
/// alphabet and a length of 4n+1; no padding needed.
fn decode_base64(src: &[u8]) -> Option<Vec<u8>> {
    let val = |b: u8| B64.iter().position(|&c| c == b).map(|v| v as u32);
    let len = src.iter().position(|&b| b == b'=').unwrap_or(src.len());
    let src = &src[..len];
    if len % 4 == 1 {
        return None;
    }
    let vals: Vec<u32> = src.iter().map(|&b| val(b)).collect::<Option<_>>()?;
    let mut out = Vec::with_capacity(len / 4 * 3 + 2);
    for c in vals.chunks(4) {
        let mut n = 0u32;
        for (i, v) in c.iter().enumerate() {
            n |= v << (18 - 6 * i);
        }
        out.push((n >> 16) as u8);
        if c.len() > 2 {
            out.push((n >> 8) as u8);
        }
        if c.len() > 3 {
            out.push(n as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(s: &str) -> Vec<u8> {
        format!("Basic {}", encode_base64(s.as_bytes())).into_bytes()
    }

    #[test]
    fn credentials_as_nginx() {
        assert_eq!(
            credentials(&basic("alice:s3cr:et")),
            Some((b"alice".to_vec(), b"s3cr:et".to_vec()))
        );
        // Any case, several spaces, no padding.
        assert_eq!(
            credentials(b"bAsIc    YTpi"),
            Some((b"a".to_vec(), b"b".to_vec()))
        );
        assert_eq!(credentials(&basic("a:")), Some((b"a".to_vec(), vec![])));
        // Malformed: no scheme, other scheme, empty token, bad base64, 4n+1 length, no
        // colon, empty user.
        for bad in [
            &b""[..],
            b"Basic",
            b"Basic ",
            b"Basic    ",
            b"Bearer YTpi",
            b"BasicYTpi",
            b"Basic YT!i",
            b"Basic YTpiY",
        ] {
            assert_eq!(credentials(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(credentials(&basic("nocolon")), None);
        assert_eq!(credentials(&basic(":pass")), None);
    }

    #[test]
    fn user_lines_as_nginx() {
        let file = b"# comment:x\nalice:{PLAIN}a:extra\r\nnocolon\nbob:\nal:{PLAIN}short\n\rcarol:{PLAIN}x\ndave:{PLAIN}d";
        assert_eq!(find_user(file, b"alice"), Some(&b"{PLAIN}a"[..]));
        assert_eq!(find_user(file, b"al"), Some(&b"{PLAIN}short"[..]));
        assert_eq!(find_user(file, b"bob"), Some(&b""[..]));
        // A line without a colon is no user, a comment is none, a CR-led line is skipped.
        assert_eq!(find_user(file, b"nocolon"), None);
        assert_eq!(find_user(file, b"# comment"), None);
        assert_eq!(find_user(file, b"\rcarol"), None);
        assert_eq!(find_user(file, b"carol"), None);
        // The last line needs no newline.
        assert_eq!(find_user(file, b"dave"), Some(&b"{PLAIN}d"[..]));
        assert_eq!(find_user(file, b"eve"), None);
        assert_eq!(find_user(b"", b"eve"), None);
    }

    #[test]
    fn schemes_nginx_computes() {
        // nginx-tests' auth_basic.t values for "password".
        for stored in [
            "{PLAIN}password",
            "{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=",
            "{SSHA}yI6cZwQadOA1e+/f+T+H3eCQQhRzYWx0",
            "$apr1$salt$Xxd1irWT9ycqoYxGFn4cb.",
        ] {
            assert_eq!(verify(b"password", stored.as_bytes()), Ok(true), "{stored}");
            assert_eq!(
                verify(b"passwore", stored.as_bytes()),
                Ok(false),
                "{stored}"
            );
            assert_eq!(verify(b"", stored.as_bytes()), Ok(false), "{stored}");
        }
        // Broken values never match (nginx: 401).
        for stored in [
            "$apr1$",
            "{SSHA}_____wQadOA1e+/f+T+H3eCQQhRzYWx0",
            "{SSHA}Zm9vCg==",
            "{SHA}_____Mm5Pz8GgiULbPgzG37mj9g=",
            "{SHA}Zm9vCg==",
            "{PLAIN}",
        ] {
            assert_eq!(verify(b"1", stored.as_bytes()), Ok(false), "{stored}");
        }
        assert_eq!(
            verify(b"", b"{PLAIN}"),
            Ok(true),
            "an empty plain password is one"
        );
        // A NUL ends the password, as nginx's C string.
        assert_eq!(verify(b"password\0junk", b"{PLAIN}password"), Ok(true));
    }

    #[test]
    fn schemes_of_the_c_library() {
        // Made with `openssl passwd -1 -salt salt password`, `mkpasswd -m sha-256/sha-512`,
        // Perl's crypt('password', 'salt') and `htpasswd -nbB` (bcrypt, $2y$).
        for stored in [
            "sa3tHJ3/KuYvI",
            "$1$salt$qJH7.N4xYta3aEG/dfqo/0",
            "$5$saltsalt$gOjOtoMpVhru2uyjeJSEc/JaLQWOXMNmlOnj6T4AtC.",
            "$6$saltsalt$qFmFH.bQmmtXzyBY0s9v7Oicd2z4XSIecDzlB5KiA2/jctKu9YterLp8wwnSq.qc.eoxqOmSuNp2xS0ktL3nh/",
            "$2y$05$dxx8yna8k0DCKzXSTee4vOvWtuda7.zW8qenYWTeYneLJZXuRP6Pa",
            "$2b$05$abcdefghijklmnopqrstuuWG29KuyeAicPCJODk1zjyGvyQUU2awu",
        ] {
            assert_eq!(verify(b"password", stored.as_bytes()), Ok(true), "{stored}");
            assert_eq!(verify(b"Password", stored.as_bytes()), Ok(false), "{stored}");
        }
        // An empty hash or a broken one matches no password.
        assert_ne!(verify(b"", b""), Ok(true));
        assert_ne!(verify(b"1", b"$1$"), Ok(true));
        assert_ne!(verify(b"x", b"$2y$99$broken"), Ok(true));
    }

    #[test]
    fn base64_round_trip_and_nginx_leniency() {
        for s in [&b""[..], b"a", b"ab", b"abc", b"abcd", &[0, 255, 128, 7, 9]] {
            assert_eq!(
                decode_base64(encode_base64(s).as_bytes()).as_deref(),
                Some(s)
            );
        }
        assert_eq!(
            decode_base64(b"YWI=trailing-ignored").as_deref(),
            Some(&b"ab"[..])
        );
        assert_eq!(decode_base64(b"YWI").as_deref(), Some(&b"ab"[..]));
        assert_eq!(decode_base64(b"Y"), None);
        assert_eq!(decode_base64(b"Y W"), None);
    }
}
