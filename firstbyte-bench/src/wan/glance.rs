//! The "at a glance" tables of a plan with several links: one row per (link, size, column of
//! cells), one column per condition, the median with who wins — what a reader takes in first,
//! before each link's full tables.
//!
//! A cell is the median (ms); the lowest of its row is in bold, and a cell at least 5% slower
//! whose bootstrap interval lies wholly above the lowest one's also gets its ratio to it
//! (`201.5 (2.0×)`): a loss beyond noise.

use std::fmt::Write as _;

use super::plan::size_label;
use super::summary::Group;

/// A loss is shown with its ratio from 5% slower on: a tenth of a millisecond beyond a tight
/// interval is real but not what a reader looks for.
const MATTERS: f64 = 1.05;

/// One link's name and its groups (as `summary::groups` makes them).
pub struct LinkGroups {
    /// The link's name.
    pub name: String,
    /// Its cells, by size and column.
    pub groups: Vec<Group>,
}

/// The two tables (TTFB median, total median).
pub fn render(links: &[LinkGroups]) -> String {
    let mut out = String::new();
    let Some(first) = links.iter().find_map(|l| l.groups.first()) else {
        return out;
    };
    let conds: Vec<&str> = first.cells.iter().map(|c| c.condition.as_str()).collect();
    for (metric, title) in [(0, "time to first byte"), (1, "time to the last byte")] {
        let _ = writeln!(
            out,
            "## At a glance: median {title} (ms)\n\nBold: the lowest of the row; `(N×)`: at least \
             5% slower than it, beyond noise (bootstrap 95% intervals apart). Times of a warm connection's \
             later requests (`@GAP`) run from sending that request.\n"
        );
        let _ = writeln!(out, "| link | size | request | {} |", conds.join(" | "));
        let _ = writeln!(out, "|---|---|---|{}", "---|".repeat(conds.len()));
        for l in links {
            for g in &l.groups {
                let ests: Vec<_> = g
                    .cells
                    .iter()
                    .map(|c| c.stats.map(|s| s[metric][0]))
                    .collect();
                let best = ests
                    .iter()
                    .flatten()
                    .min_by(|a, b| a.value.total_cmp(&b.value))
                    .copied();
                let cells: Vec<String> = ests
                    .iter()
                    .map(|e| match (e, best) {
                        (None, _) | (_, None) => "—".into(),
                        (Some(e), Some(b)) if e.value <= b.value => format!("**{:.1}**", e.value),
                        (Some(e), Some(b))
                            if e.lo > b.hi && b.value > 0.0 && e.value >= b.value * MATTERS =>
                        {
                            format!("{:.1} ({:.1}×)", e.value, e.value / b.value)
                        }
                        (Some(e), _) => format!("{:.1}", e.value),
                    })
                    .collect();
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} |",
                    l.name,
                    size_label(g.size),
                    g.client,
                    cells.join(" | ")
                );
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::stats::Estimate;
    use super::super::summary::Cell;
    use super::*;

    fn cell(name: &str, ttfb: (f64, f64, f64)) -> Cell {
        let e = |(value, lo, hi): (f64, f64, f64)| Estimate { value, lo, hi };
        let q = |m: (f64, f64, f64)| [e(m), e(m), e(m)];
        Cell {
            condition: name.into(),
            server: "firstbyte".into(),
            ran: true,
            n: 10,
            failed: 0,
            syn_retransmitted: 0,
            elsewhere: Vec::new(),
            stats: Some([q(ttfb), q(ttfb), q(ttfb), q(ttfb)]),
        }
    }

    #[test]
    fn best_is_bold_and_losses_beyond_noise_get_a_ratio() {
        let links = [LinkGroups {
            name: "100ms".into(),
            groups: vec![Group {
                size: 102_400,
                client: "rust-h2-warm@1.5s".into(),
                cells: vec![
                    cell("fb-16k", (201.5, 201.2, 201.7)),
                    cell("fb-adaptive", (100.9, 100.9, 101.2)),
                    cell("fb-4k", (101.0, 100.9, 101.2)),
                    cell("nginx-4k", (101.9, 101.5, 102.0)),
                ],
            }],
        }];
        let t = render(&links);
        assert!(
            t.contains(
                "| 100ms | 100 KB | rust-h2-warm@1.5s | 201.5 (2.0×) | **100.9** | 101.0 | 101.9 |"
            ),
            "{t}"
        );
        assert_eq!(t.matches("## At a glance").count(), 2);
        assert!(render(&[]).is_empty());
    }
}
