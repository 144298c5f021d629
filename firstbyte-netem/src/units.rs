//! Parsing of the values the command line takes, in tc/netem's spellings.
//!
//! Text in, numbers out: durations become nanoseconds (`50ms`, `1s`, `250us`), rates become
//! bits per second (`100mbit`, `500kbit`; `kbps`-style units are bytes per second, as in tc),
//! percentages become probabilities in `[0, 1]` (`1%`, `0.5%`). Nothing here touches the clock.

use thiserror::Error;

/// A value the command line could not understand.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum UnitError {
    /// Not a duration with a unit (`50ms`, `1s`, `250us`, `0`).
    #[error("invalid time value \"{0}\": expected a number with a unit, like 50ms, 1s or 250us")]
    Duration(String),
    /// Not a rate with a unit (`100mbit`, `1gbit`, `500kbit`).
    #[error(
        "invalid rate value \"{0}\": expected a number with a unit, like 100mbit, 1gbit or 500kbit"
    )]
    Rate(String),
    /// Not a percentage between 0 and 100 (`1%`, `0.5%`).
    #[error("invalid percentage \"{0}\": expected a value from 0% to 100%, like 1% or 0.5%")]
    Percent(String),
}

/// Longest duration accepted: one hour, far beyond any WAN and safe from overflow in ns.
const MAX_DURATION_NS: f64 = 3_600e9;

/// Fastest rate accepted: 100 Gbit/s, far beyond what one core forwards (~250 Mbit/s here).
const MAX_RATE_BPS: f64 = 100e9;

/// Splits `"12.5ms"` into `(12.5, "ms")`; the number must be finite and not negative.
fn split_number(text: &str) -> Option<(f64, &str)> {
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(end);
    if number.is_empty() || number.starts_with('.') && number.len() == 1 {
        return None;
    }
    let value: f64 = number.parse().ok()?;
    value.is_finite().then_some((value, unit))
}

/// Parses a duration (`50ms`, `1.5s`, `250us`, `100ns`, `0`) into nanoseconds.
pub fn parse_duration(text: &str) -> Result<u64, UnitError> {
    let bad = || UnitError::Duration(text.to_string());
    let (value, unit) = split_number(text.trim()).ok_or_else(bad)?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" if value == 0.0 => 0.0,
        "ns" | "nsec" => 1.0,
        "us" | "usec" | "µs" => 1e3,
        "ms" | "msec" => 1e6,
        "s" | "sec" | "secs" => 1e9,
        _ => return Err(bad()),
    };
    let ns = value * scale;
    if ns > MAX_DURATION_NS {
        return Err(bad());
    }
    Ok(ns.round() as u64)
}

/// Parses a rate (`100mbit`, `10Mbit`, `1gbit`, `500kbit`, `1mbps` = bytes/s as in tc) into
/// bits per second. Units are decimal (1 kbit = 1000 bit), as in tc.
pub fn parse_rate(text: &str) -> Result<u64, UnitError> {
    let bad = || UnitError::Rate(text.to_string());
    let (value, unit) = split_number(text.trim()).ok_or_else(bad)?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "bps" => 8.0,
        "kbps" => 8e3,
        "mbps" => 8e6,
        "gbps" => 8e9,
        _ => return Err(bad()),
    };
    let bps = value * scale;
    if !(1.0..=MAX_RATE_BPS).contains(&bps) {
        return Err(bad());
    }
    Ok(bps.round() as u64)
}

/// Parses a percentage (`1%`, `0.5%`, or a bare `1` meaning 1%) into a probability in `[0, 1]`.
pub fn parse_percent(text: &str) -> Result<f64, UnitError> {
    let bad = || UnitError::Percent(text.to_string());
    let trimmed = text.trim();
    let number = trimmed.strip_suffix('%').unwrap_or(trimmed);
    let (value, rest) = split_number(number).ok_or_else(bad)?;
    if !rest.is_empty() || value > 100.0 {
        return Err(bad());
    }
    Ok(value / 100.0)
}

/// Formats a byte count for people: `512 B`, `1.5 kB`, `12.3 MB` (decimal units).
pub fn human_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    if b < 1e3 {
        format!("{bytes} B")
    } else if b < 1e6 {
        format!("{:.1} kB", b / 1e3)
    } else if b < 1e9 {
        format!("{:.1} MB", b / 1e6)
    } else {
        format!("{:.2} GB", b / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_tc_spellings() {
        assert_eq!(parse_duration("50ms"), Ok(50_000_000));
        assert_eq!(parse_duration("1s"), Ok(1_000_000_000));
        assert_eq!(parse_duration("250us"), Ok(250_000));
        assert_eq!(parse_duration("0.5ms"), Ok(500_000));
        assert_eq!(parse_duration("10msec"), Ok(10_000_000));
        assert_eq!(parse_duration("0"), Ok(0));
        assert_eq!(parse_duration("7ns"), Ok(7));
    }

    #[test]
    fn durations_rejected() {
        for bad in [
            "",
            "ms",
            "50",
            "-5ms",
            "5 minutes",
            "1e3ms",
            ".ms",
            "2h",
            "9999s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn rates_in_tc_spellings() {
        assert_eq!(parse_rate("100mbit"), Ok(100_000_000));
        assert_eq!(parse_rate("10Mbit"), Ok(10_000_000));
        assert_eq!(parse_rate("1gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate("500kbit"), Ok(500_000));
        assert_eq!(parse_rate("2.5mbit"), Ok(2_500_000));
        assert_eq!(parse_rate("1mbps"), Ok(8_000_000));
    }

    #[test]
    fn rates_rejected() {
        for bad in ["", "100", "100mb", "0mbit", "fast", "1000gbit"] {
            assert!(parse_rate(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn percentages() {
        assert_eq!(parse_percent("1%"), Ok(0.01));
        assert_eq!(parse_percent("0.5%"), Ok(0.005));
        assert_eq!(parse_percent("100%"), Ok(1.0));
        assert_eq!(parse_percent("10"), Ok(0.1));
        for bad in ["", "%", "101%", "-1%", "1%%", "one%"] {
            assert!(parse_percent(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn byte_counts_for_people() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1_500), "1.5 kB");
        assert_eq!(human_bytes(12_345_678), "12.3 MB");
    }
}
