//! Values with units, as nginx reads them: sizes (`512`, `4k`, `1m`, `1g`), times (`1s`,
//! `500ms`, `1m30s`, bare numbers are seconds) and flags (`on`/`off`).
//!
//! Pure functions from text to a value; `None` means "not valid" and the caller words the
//! error for its directive.

use std::time::Duration;

/// `512`, `4k`/`4K`, `1m`/`1M`, `1g`/`1G` → bytes (nginx's `ngx_parse_offset`).
pub(crate) fn size(s: &str) -> Option<u64> {
    let (digits, scale) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1u64 << 10),
        b'm' | b'M' => (&s[..s.len() - 1], 1 << 20),
        b'g' | b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(scale)
}

/// `1s`, `500ms`, `5m`, `1h`, `1d`, `1w`, `1M` (30 days), `1y` (365 days), bare numbers as
/// seconds, and combinations in decreasing order such as `1m30s` or `1h 30m` (nginx's
/// `ngx_parse_time`).
pub(crate) fn time(s: &str) -> Option<Duration> {
    // Units, largest first; a combination must use them in this order, each once.
    const UNITS: [(&str, u64); 8] = [
        ("y", 365 * 86_400_000),
        ("M", 30 * 86_400_000),
        ("w", 7 * 86_400_000),
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
        ("ms", 1),
    ];
    let mut rest = s.trim_start();
    if rest.is_empty() {
        return None;
    }
    let mut total_ms: u64 = 0;
    let mut next_unit = 0; // index into UNITS of the largest unit still allowed
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let letters = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = &rest[..letters];
        rest = rest[letters..].trim_start();
        let idx = if unit.is_empty() {
            // A bare number: seconds, and it must be the last part.
            if !rest.is_empty() {
                return None;
            }
            6
        } else {
            UNITS.iter().position(|(u, _)| *u == unit)?
        };
        if idx < next_unit {
            return None;
        }
        next_unit = idx + 1;
        total_ms = total_ms.checked_add(n.checked_mul(UNITS[idx].1)?)?;
    }
    Some(Duration::from_millis(total_ms))
}

/// `on` → true, `off` → false (nginx accepts any case).
pub(crate) fn flag(s: &str) -> Option<bool> {
    if s.eq_ignore_ascii_case("on") {
        Some(true)
    } else if s.eq_ignore_ascii_case("off") {
        Some(false)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(size("512"), Some(512));
        assert_eq!(size("4k"), Some(4096));
        assert_eq!(size("4K"), Some(4096));
        assert_eq!(size("16k"), Some(16384));
        assert_eq!(size("1m"), Some(1 << 20));
        assert_eq!(size("1M"), Some(1 << 20));
        assert_eq!(size("1g"), Some(1 << 30));
        assert_eq!(size("0"), Some(0));
        for bad in ["", "k", "1x", "-1", "1.5m", "99999999999999999999g", "1 k"] {
            assert_eq!(size(bad), None, "{bad}");
        }
    }

    #[test]
    fn times() {
        assert_eq!(time("1s"), Some(Duration::from_secs(1)));
        assert_eq!(time("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(time("5m"), Some(Duration::from_secs(300)));
        assert_eq!(time("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(time("1d"), Some(Duration::from_secs(86_400)));
        assert_eq!(time("75"), Some(Duration::from_secs(75)));
        assert_eq!(time("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(time("1h 30m"), Some(Duration::from_secs(5400)));
        assert_eq!(time("1s500ms"), Some(Duration::from_millis(1500)));
        for bad in ["", "s", "1x", "30s1m", "1m1m", "10 5", "-1s", "1.5s"] {
            assert_eq!(time(bad), None, "{bad}");
        }
    }

    #[test]
    fn flags() {
        assert_eq!(flag("on"), Some(true));
        assert_eq!(flag("OFF"), Some(false));
        assert_eq!(flag("maybe"), None);
    }
}
