//! Turning per-run values into the bench's three files: `results.json` (every value and
//! every summary), `summary.md` (one table: each figure's median with min–max per server and
//! firstbyte's ratio to each peer) and `machine.md` (what ran where, and the exact command).
//! Formatting is pure: [`summary_markdown`] takes values and returns text.

use serde::Serialize;

use super::measures::{Measure, METRICS};
use super::servers::Kind;
use super::stats::{self, Summary};

/// One figure of one run of one server.
#[derive(Debug, Clone, Serialize)]
pub struct Value {
    /// Measure key (`handshake`, `h2_1k`, ...).
    pub measure: &'static str,
    /// Metric key within the measure (`cpu_us`, ...).
    pub metric: &'static str,
    /// Which server.
    pub server: Kind,
    /// Run index, 0-based.
    pub run: usize,
    /// The value, in the metric's unit.
    pub value: f64,
}

/// The per-server summary of one metric, as written to results.json.
#[derive(Debug, Clone, Serialize)]
pub struct MetricSummary {
    /// Measure key.
    pub measure: &'static str,
    /// Metric key.
    pub metric: &'static str,
    /// Row label.
    pub label: &'static str,
    /// Smaller is better.
    pub lower_is_better: bool,
    /// (server, summary) for each server that has values.
    pub servers: Vec<(Kind, Summary)>,
}

/// Summaries of every metric that has values.
pub fn summaries(values: &[Value]) -> Vec<MetricSummary> {
    METRICS
        .iter()
        .filter_map(|m| {
            let servers: Vec<(Kind, Summary)> = Kind::ALL
                .iter()
                .filter_map(|&kind| {
                    let v: Vec<f64> = values
                        .iter()
                        .filter(|v| {
                            v.measure == m.measure.key() && v.metric == m.key && v.server == kind
                        })
                        .map(|v| v.value)
                        .collect();
                    stats::summarize(&v).map(|s| (kind, s))
                })
                .collect();
            (!servers.is_empty()).then(|| MetricSummary {
                measure: m.measure.key(),
                metric: m.key,
                label: m.label,
                lower_is_better: m.lower_is_better,
                servers,
            })
        })
        .collect()
}

/// A number with about three significant digits, no exponent.
pub fn fmt_num(x: f64) -> String {
    let a = x.abs();
    if a >= 1000.0 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 10.0 {
        format!("{x:.2}")
    } else if a == 0.0 {
        "0".to_string()
    } else {
        format!("{x:.3}")
    }
}

/// What the `/1k` rows are, said under the table whenever they are in it.
pub const FLOOR_NOTE: &str = "`/1k` rows (`h2_1k`, `h3_1k`): a literal 3-character path, no \
    browser headers — a floor, not a browser request. The browser rows (`*_req`: the page's \
    real paths at 1 KiB each; `*_page`: the page at its real sizes) send Chromium's headers.";

/// The summary table in Markdown.
pub fn summary_markdown(values: &[Value]) -> String {
    let sums = summaries(values);
    let mut out = String::from(
        "Median (min–max) over the runs; ratio = firstbyte's median / the peer's median \
         (below 1 is better for firstbyte where lower is better, above 1 where higher is).\n\n\
         | measure | firstbyte | nginx | h2o | caddy | fb/nginx | fb/h2o | fb/caddy |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for s in &sums {
        let get = |k: Kind| {
            s.servers
                .iter()
                .find(|(kind, _)| *kind == k)
                .map(|(_, v)| *v)
        };
        let cell = |k: Kind| match get(k) {
            Some(v) => format!(
                "{} ({}–{})",
                fmt_num(v.median),
                fmt_num(v.min),
                fmt_num(v.max)
            ),
            None => "—".to_string(),
        };
        let ratio = |peer: Kind| {
            match (get(Kind::Firstbyte), get(peer)) {
                (Some(fb), Some(p)) => stats::ratio(fb.median, p.median),
                _ => None,
            }
            .map_or("—".to_string(), |r| format!("{r:.2}"))
        };
        let better = if s.lower_is_better { "↓" } else { "↑" };
        out.push_str(&format!(
            "| {} {better} | {} | {} | {} | {} | {} | {} | {} |\n",
            s.label,
            cell(Kind::Firstbyte),
            cell(Kind::Nginx),
            cell(Kind::H2o),
            cell(Kind::Caddy),
            ratio(Kind::Nginx),
            ratio(Kind::H2o),
            ratio(Kind::Caddy),
        ));
    }
    let floor = [Measure::H2.key(), Measure::H3.key()];
    if values.iter().any(|v| floor.contains(&v.measure)) {
        out.push_str(&format!("\n{FLOOR_NOTE}\n"));
    }
    out
}

/// Measures without any value (failed or skipped), for the summary's notes.
pub fn missing_measures(values: &[Value]) -> Vec<&'static str> {
    Measure::ALL
        .iter()
        .map(|m| m.key())
        .filter(|k| !values.iter().any(|v| v.measure == *k))
        .collect()
}

/// A subcommand's closing writes: `summary.md` (`md`, also printed) and `results.json`
/// (`json`, pretty) in `out`, then where they went, on stderr.
pub fn write_outputs(out: &std::path::Path, md: &str, json: &impl Serialize) -> anyhow::Result<()> {
    std::fs::write(out.join("summary.md"), md)?;
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(json)?,
    )?;
    println!("{md}");
    eprintln!("wrote {}", out.display());
    Ok(())
}

/// `YYYYMMDDTHHMMSSZ` for a Unix time in seconds (UTC, proleptic Gregorian).
pub fn utc_stamp(unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64;
    let secs = unix_secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// The version of `package` in a Cargo.lock text.
pub fn lock_version(lock: &str, package: &str) -> Option<String> {
    let want = format!("name = \"{package}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == want {
            let v = lines.next()?.trim().strip_prefix("version = \"")?;
            return v.strip_suffix('"').map(str::to_string);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(
        measure: &'static str,
        metric: &'static str,
        server: Kind,
        run: usize,
        value: f64,
    ) -> Value {
        Value {
            measure,
            metric,
            server,
            run,
            value,
        }
    }

    #[test]
    fn table_has_medians_ranges_and_ratios() {
        let mut values = Vec::new();
        for (run, (fb, ng, h)) in [
            (100.0, 200.0, 250.0),
            (110.0, 220.0, 260.0),
            (90.0, 210.0, 240.0),
        ]
        .into_iter()
        .enumerate()
        {
            values.push(v("handshake", "cpu_us", Kind::Firstbyte, run, fb));
            values.push(v("handshake", "cpu_us", Kind::Nginx, run, ng));
            values.push(v("handshake", "cpu_us", Kind::H2o, run, h));
        }
        let md = summary_markdown(&values);
        let row = md
            .lines()
            .find(|l| l.contains("handshake: server CPU"))
            .expect("row");
        assert!(row.contains("| 100.0 (90.00–110.0) |"), "{row}");
        assert!(row.contains("| 210.0 (200.0–220.0) |"), "{row}");
        assert!(row.ends_with("| — | 0.48 | 0.40 | — |"), "{row}");
        assert!(
            !md.contains("idle HTTP"),
            "metrics without values are left out"
        );
        assert_eq!(missing_measures(&values).len(), Measure::ALL.len() - 1);
    }

    #[test]
    fn a_missing_server_shows_a_dash() {
        let values = [v("ttfb", "max_ms", Kind::Nginx, 0, 0.2)];
        let md = summary_markdown(&values);
        let row = md.lines().find(|l| l.contains("max ms")).expect("row");
        assert!(
            row.ends_with("| — | 0.200 (0.200–0.200) | — | — | — | — | — |"),
            "{row}"
        );
    }

    #[test]
    fn http3_row_compares_firstbyte_with_caddy() {
        let values = [
            v("h3_1k", "cpu_us", Kind::Firstbyte, 0, 20.0),
            v("h3_1k", "cpu_us", Kind::Caddy, 0, 40.0),
        ];
        let md = summary_markdown(&values);
        let row = md
            .lines()
            .find(|l| l.contains("HTTP/3 `/1k` floor, keep-alive: server CPU"))
            .expect("row");
        assert!(
            row.ends_with("| — | — | 40.00 (40.00–40.00) | — | — | 0.50 |"),
            "{row}"
        );
        assert!(md.contains("a floor, not a browser request"), "{md}");
    }

    #[test]
    fn browser_rows_are_not_called_a_floor() {
        let values = [
            v("h2_page", "cpu_s_gib", Kind::Firstbyte, 0, 0.5),
            v("h2_page", "cpu_s_gib", Kind::H2o, 0, 1.0),
            v("h1_req", "cpu_us", Kind::Nginx, 0, 9.0),
        ];
        let md = summary_markdown(&values);
        let row = md
            .lines()
            .find(|l| l.contains("HTTP/2 page mix: server CPU-s per GiB"))
            .expect("row");
        assert!(
            row.ends_with("| — | 1.000 (1.000–1.000) | — | — | 0.50 | — |"),
            "{row}"
        );
        assert!(
            md.contains("HTTP/1.1 browser request (1 KiB): server CPU"),
            "{md}"
        );
        assert!(!md.contains("floor"), "{md}");
    }

    #[test]
    fn numbers_keep_three_digits() {
        assert_eq!(fmt_num(4613.4), "4613");
        assert_eq!(fmt_num(217.04), "217.0");
        assert_eq!(fmt_num(15.83), "15.83");
        assert_eq!(fmt_num(1.75), "1.750");
        assert_eq!(fmt_num(0.0), "0");
    }

    #[test]
    fn utc_stamps() {
        assert_eq!(utc_stamp(0), "19700101T000000Z");
        assert_eq!(utc_stamp(951_782_400), "20000229T000000Z");
        assert_eq!(utc_stamp(1_795_314_405), "20261122T022645Z");
    }

    #[test]
    fn lock_versions() {
        let lock = "[[package]]\nname = \"rustls\"\nversion = \"0.23.46\"\n\n\
                    [[package]]\nname = \"rustls-pki-types\"\nversion = \"1.15.0\"\n";
        assert_eq!(lock_version(lock, "rustls").as_deref(), Some("0.23.46"));
        assert_eq!(
            lock_version(lock, "rustls-pki-types").as_deref(),
            Some("1.15.0")
        );
        assert_eq!(lock_version(lock, "tokio"), None);
    }
}
