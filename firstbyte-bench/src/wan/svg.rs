//! `plot.svg`: per size (and client), the distribution of TTFB and of total time per
//! condition, as empirical CDFs on a logarithmic time axis (the tails, where record sizing
//! acts, stay readable next to the 3-RTT floor). Hand-written SVG, no dependencies.

use std::fmt::Write as _;

use super::plan::{size_label, Plan};
use super::results::Row;
use super::stats::sorted;

/// Colours of the conditions, in plan order (Tableau 10, distinguishable when printed).
const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

const PANEL_W: f64 = 460.0;
const PANEL_H: f64 = 240.0;
const MARGIN_L: f64 = 60.0;
const MARGIN_T: f64 = 40.0;
const GAP_Y: f64 = 70.0;
const GAP_X: f64 = 80.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Renders the plot of the rows (successful requests only).
pub fn render(plan: &Plan, rows: &[Row]) -> String {
    let mut panels = Vec::new();
    for &size in &plan.sizes {
        for client in plan.series() {
            panels.push((size, client));
        }
    }
    let legend_h = 20.0 * plan.conditions.len().div_ceil(3) as f64 + 10.0;
    let width = MARGIN_L + 2.0 * PANEL_W + GAP_X + 30.0;
    let height = legend_h + MARGIN_T + panels.len() as f64 * (PANEL_H + GAP_Y);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (i, c) in plan.conditions.iter().enumerate() {
        let x = MARGIN_L + (i % 3) as f64 * 300.0;
        let y = 18.0 + (i / 3) as f64 * 20.0;
        let colour = PALETTE[i % PALETTE.len()];
        let _ = writeln!(
            out,
            r#"<line x1="{x:.0}" y1="{:.0}" x2="{:.0}" y2="{:.0}" stroke="{colour}" stroke-width="3"/><text x="{:.0}" y="{y:.0}">{} ({})</text>"#,
            y - 4.0,
            x + 24.0,
            y - 4.0,
            x + 30.0,
            esc(&c.name),
            c.server.name()
        );
    }
    for (p, (size, client)) in panels.iter().enumerate() {
        let top = legend_h + MARGIN_T + p as f64 * (PANEL_H + GAP_Y);
        for (col, metric) in ["TTFB", "total"].iter().enumerate() {
            let left = MARGIN_L + col as f64 * (PANEL_W + GAP_X);
            let series: Vec<Vec<f64>> = plan
                .conditions
                .iter()
                .map(|c| {
                    sorted(
                        &rows
                            .iter()
                            .filter(|r| r.ok() && r.size_bytes == *size && r.series() == *client)
                            .filter(|r| r.condition == c.name)
                            .map(|r| if col == 0 { r.ttfb_ms } else { r.total_ms })
                            .filter(|v| *v > 0.0)
                            .collect::<Vec<_>>(),
                    )
                })
                .collect();
            panel(
                &mut out,
                left,
                top,
                &format!("{} — {client}: {metric} (ms)", size_label(*size)),
                &series,
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

fn panel(out: &mut String, left: f64, top: f64, title: &str, series: &[Vec<f64>]) {
    let all: Vec<f64> = series.iter().flatten().copied().collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let _ = writeln!(
        out,
        r##"<text x="{left:.0}" y="{:.0}" font-weight="bold">{}</text><rect x="{left:.0}" y="{top:.0}" width="{PANEL_W:.0}" height="{PANEL_H:.0}" fill="none" stroke="#999"/>"##,
        top - 8.0,
        esc(title)
    );
    if !lo.is_finite() || !hi.is_finite() {
        let _ = writeln!(
            out,
            r#"<text x="{:.0}" y="{:.0}">no data</text>"#,
            left + 10.0,
            top + 20.0
        );
        return;
    }
    let (llo, lhi) = (
        (lo * 0.95).log10(),
        (hi * 1.05).log10().max(lo.log10() + 0.01),
    );
    let x = |v: f64| left + (v.log10() - llo) / (lhi - llo) * PANEL_W;
    let y = |f: f64| top + PANEL_H - f * PANEL_H;
    for v in ticks(lo * 0.95, hi * 1.05) {
        let xv = x(v);
        let _ = writeln!(
            out,
            r##"<line x1="{xv:.1}" y1="{top:.0}" x2="{xv:.1}" y2="{:.0}" stroke="#eee"/><text x="{xv:.1}" y="{:.0}" text-anchor="middle">{v}</text>"##,
            top + PANEL_H,
            top + PANEL_H + 15.0
        );
    }
    for f in [0.0, 0.5, 0.95] {
        let yv = y(f);
        let _ = writeln!(
            out,
            r##"<line x1="{left:.0}" y1="{yv:.1}" x2="{:.0}" y2="{yv:.1}" stroke="#eee"/><text x="{:.0}" y="{:.1}" text-anchor="end">{f}</text>"##,
            left + PANEL_W,
            left - 5.0,
            yv + 4.0
        );
    }
    for (i, s) in series.iter().enumerate() {
        if s.is_empty() {
            continue;
        }
        let n = s.len() as f64;
        let mut d = format!("M{:.1},{:.1}", x(s[0]), y(0.0));
        for (k, &v) in s.iter().enumerate() {
            let _ = write!(d, " H{:.1} V{:.1}", x(v), y((k + 1) as f64 / n));
        }
        let _ = writeln!(
            out,
            r#"<path d="{d}" fill="none" stroke="{}" stroke-width="1.5"/>"#,
            PALETTE[i % PALETTE.len()]
        );
    }
}

/// Tick values for a log axis over [lo, hi]: the coarsest of 1-2-5 per decade, 1–9 per
/// decade, or 1–9 of the decade below, that puts at least three ticks in range (at most 12).
pub fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo && lo.is_finite() && hi.is_finite()) {
        return Vec::new();
    }
    let first = lo.log10().floor() as i32 - 1;
    let last = hi.log10().ceil() as i32;
    let mut best = Vec::new();
    let sets: [(&[f64], i32); 3] = [
        (&[1.0, 2.0, 5.0], 0),
        (&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], 0),
        (&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], 1),
    ];
    for (mults, finer) in sets {
        let mut t = Vec::new();
        for k in first..=last {
            let step = 10f64.powi(k - finer);
            for m in mults {
                for d in 0..if finer > 0 { 10 } else { 1 } {
                    let v = step * m + f64::from(d) * 10f64.powi(k) * f64::from(finer);
                    let v = (v * 1e6).round() / 1e6;
                    if v >= lo && v <= hi && !t.contains(&v) {
                        t.push(v);
                    }
                }
            }
        }
        t.sort_by(|a, b| a.total_cmp(b));
        if t.len() > 12 && !best.is_empty() {
            break;
        }
        best = t;
        if best.len() >= 3 {
            break;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_has_a_panel_per_size_and_metric_and_a_path_per_condition() {
        let plan = Plan::parse(
            r#"seed = 1
            n = 3
            sizes = ["10k", "1m"]
            clients = ["curl-h2"]
            baseline = "a"
            [[condition]]
            name = "a"
            server = "firstbyte"
            [[condition]]
            name = "b<&>"
            server = "nginx""#,
            false,
        );
        // The name with markup characters is rejected by the plan; use a plain one.
        assert!(plan.is_err());
        let plan = Plan::parse(
            r#"seed = 1
            n = 3
            sizes = ["10k", "1m"]
            clients = ["curl-h2"]
            baseline = "a"
            [[condition]]
            name = "a"
            server = "firstbyte"
            [[condition]]
            name = "b"
            server = "nginx""#,
            false,
        )
        .expect("plan");
        let mut rows = Vec::new();
        for (i, cond) in ["a", "b"].iter().enumerate() {
            for seq in 0..3u32 {
                rows.push(Row {
                    condition: cond.to_string(),
                    server: "x".into(),
                    size_bytes: 10240,
                    client: "curl-h2".into(),
                    seq,
                    connect_ms: 100.0,
                    appconnect_ms: 200.0,
                    ttfb_ms: 300.0 + f64::from(seq) + i as f64,
                    total_ms: 400.0 + f64::from(seq),
                    syn_retransmits: 0,
                    http_version: "2".into(),
                    status: 200,
                    gap_ms: 0.0,
                    position: 1,
                    handshake: "cold".into(),
                });
            }
        }
        let svg = render(&plan, &rows);
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(
            svg.matches("<path").count(),
            4,
            "2 conditions × (TTFB, total) for 10 KB"
        );
        assert!(svg.contains("10 KB — curl-h2: TTFB (ms)"));
        assert!(svg.contains("1 MB — curl-h2: total (ms)"));
        assert!(svg.contains("no data"), "1 MB has no rows");
        assert_eq!(esc("a<b&"), "a&lt;b&amp;");
    }

    #[test]
    fn ticks_fit_wide_and_narrow_ranges() {
        assert_eq!(ticks(250.0, 3500.0), vec![500.0, 1000.0, 2000.0]);
        let narrow = ticks(290.0, 330.0);
        assert!(narrow.len() >= 3 && narrow.len() <= 12, "{narrow:?}");
        assert!(
            narrow.iter().all(|&v| (290.0..=330.0).contains(&v)),
            "{narrow:?}"
        );
        assert!(ticks(0.0, 1.0).is_empty());
    }
}
