//! From results.csv rows to the tables of summary.md (also printed at the end of a run).
//!
//! Rows are grouped into cells by (size, client, condition); failed requests (status not
//! 2xx) are counted and left out of the statistics. For each cell, four metrics — TTFB,
//! total, TTFB − connect and total − connect (what the server controls, without the TCP
//! connect and its lost-SYN tail) — get median, p95 and p99, each with a seeded bootstrap 95%
//! interval. Per column the lowest value is marked `*`, or `**` when its interval is clear
//! of every other condition's (a win beyond noise). A third table gives each condition's
//! ratio to the baseline, marked `!` where the two intervals do not overlap.

use std::fmt::Write as _;

use super::plan::{size_label, Plan};
use super::results::Row;
use super::rng::stable_hash;
use super::stats::{quantile_sorted, quantiles_with_ci, sorted, Estimate};

/// The quantiles reported: median, p95, p99.
pub const QUANTILES: [f64; 3] = [0.5, 0.95, 0.99];

/// The metrics reported, in table order.
pub const METRICS: [&str; 4] = ["TTFB", "total", "TTFB − connect", "total − connect"];

/// The statistics of one (size, client, condition) cell.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Condition name.
    pub condition: String,
    /// Server kind.
    pub server: String,
    /// Whether the condition runs this column's client (a cell it does not run is left out
    /// of the tables).
    pub ran: bool,
    /// Successful requests (the sample size).
    pub n: usize,
    /// Failed requests.
    pub failed: usize,
    /// Successful requests whose connect needed a SYN retransmission.
    pub syn_retransmitted: usize,
    /// In a resuming client's own column: its successful samples that had another handshake
    /// (counted in their `CLIENT:HANDSHAKE` column instead), by handshake.
    pub elsewhere: Vec<(String, usize)>,
    /// `stats[metric][quantile]`, `None` when the cell has no successful request.
    pub stats: Option<[[Estimate; 3]; 4]>,
}

/// The cells of one size and client, in plan order.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Response size.
    pub size: u64,
    /// Client name.
    pub client: String,
    /// One per condition.
    pub cells: Vec<Cell>,
}

fn metric_values(rows: &[&Row], metric: usize) -> Vec<f64> {
    rows.iter()
        .map(|r| match metric {
            0 => r.ttfb_ms,
            1 => r.total_ms,
            2 => r.ttfb_ms - r.connect_ms,
            _ => r.total_ms - r.connect_ms,
        })
        .collect()
}

/// The columns of cells: the plan's ([`Plan::series`]), then the `CLIENT:HANDSHAKE`
/// columns of samples whose handshake was not their client's (`Row::series`), sorted.
pub fn all_series(plan: &Plan, rows: &[Row]) -> Vec<String> {
    let mut out = plan.series();
    let mut extra: Vec<String> = rows
        .iter()
        .map(Row::series)
        .filter(|s| !out.contains(s))
        .collect();
    extra.sort();
    extra.dedup();
    out.extend(extra);
    out
}

/// A client's successful first requests on `condition` whose handshake put them in another
/// column, counted by handshake (sorted).
fn elsewhere(rows: &[Row], size: u64, client: &str, condition: &str) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for r in rows.iter().filter(|r| {
        r.size_bytes == size
            && r.client == client
            && r.condition == condition
            && r.position <= 1
            && r.series() != client
    }) {
        match out.iter_mut().find(|(h, _)| *h == r.handshake) {
            Some((_, n)) => *n += 1,
            None => out.push((r.handshake.clone(), 1)),
        }
    }
    out.sort();
    out
}

/// Whether a column is a resuming client's own (it gets the "other handshake" column).
fn is_resuming(client: &str) -> bool {
    super::client::ClientKind::from_name(client)
        .is_some_and(|k| k.intended() != super::client::Handshake::Cold)
}

/// Groups the rows into cells and computes their statistics.
pub fn groups(plan: &Plan, rows: &[Row]) -> Vec<Group> {
    let mut out = Vec::new();
    let series = all_series(plan, rows);
    for &size in &plan.sizes {
        for client in series.iter().cloned() {
            let base = client
                .split([':', '@'])
                .next()
                .unwrap_or(client.as_str())
                .to_string();
            let mut cells = Vec::new();
            for cond in &plan.conditions {
                let all: Vec<&Row> = rows
                    .iter()
                    .filter(|r| {
                        r.size_bytes == size && r.series() == client && r.condition == cond.name
                    })
                    .collect();
                let ok: Vec<&Row> = all.iter().copied().filter(|r| r.ok()).collect();
                let stats = if ok.is_empty() {
                    None
                } else {
                    let mut s = [[Estimate {
                        value: 0.0,
                        lo: 0.0,
                        hi: 0.0,
                    }; 3]; 4];
                    for (m, slot) in s.iter_mut().enumerate() {
                        let seed =
                            plan.seed ^ stable_hash(&format!("{size}/{client}/{}/{m}", cond.name));
                        let est = quantiles_with_ci(&metric_values(&ok, m), &QUANTILES, seed);
                        if let Some(est) = est {
                            slot.copy_from_slice(&est);
                        }
                    }
                    Some(s)
                };
                cells.push(Cell {
                    condition: cond.name.clone(),
                    server: cond.server.name().to_string(),
                    ran: cond.clients.iter().any(|k| k.name() == base),
                    n: ok.len(),
                    failed: all.len() - ok.len(),
                    syn_retransmitted: ok.iter().filter(|r| r.syn_retransmits > 0).count(),
                    elsewhere: if client == base {
                        elsewhere(rows, size, &client, &cond.name)
                    } else {
                        Vec::new()
                    },
                    stats,
                });
            }
            out.push(Group {
                size,
                client,
                cells,
            });
        }
    }
    out
}

/// The mark of cell `i` in column (metric, quantile): `**` best beyond noise, `*` best, or
/// nothing.
pub fn mark(cells: &[Cell], i: usize, metric: usize, q: usize) -> &'static str {
    let est = |c: &Cell| c.stats.map(|s| s[metric][q]);
    let Some(mine) = est(&cells[i]) else {
        return "";
    };
    let others: Vec<Estimate> = cells
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != i)
        .filter_map(|(_, c)| est(c))
        .collect();
    if others.iter().any(|o| o.value < mine.value) {
        return "";
    }
    if !others.is_empty() && others.iter().all(|o| mine.separated_from(o)) {
        "**"
    } else {
        "*"
    }
}

fn fmt_est(e: &Estimate, mark: &str) -> String {
    let pre = if mark.is_empty() {
        String::new()
    } else {
        format!("{mark} ")
    };
    format!("{pre}{:.1} [{:.1}, {:.1}]", e.value, e.lo, e.hi)
}

fn table_head(out: &mut String, first: &[&str], metrics: &[usize]) {
    let mut cols: Vec<String> = first.iter().map(|s| s.to_string()).collect();
    for &m in metrics {
        for q in ["med", "p95", "p99"] {
            cols.push(format!("{} {q}", METRICS[m]));
        }
    }
    let _ = writeln!(out, "| {} |", cols.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(cols.len()));
}

/// The markdown tables of one group.
pub fn render_group(plan: &Plan, g: &Group) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### {} — {}\n", size_label(g.size), g.client);
    let resuming = is_resuming(&g.client);
    let mut head = vec!["condition", "server", "n", "failed", "SYN rtx"];
    if resuming {
        head.push("other handshake (own column)");
    }
    table_head(&mut out, &head, &[0, 1]);
    for (i, c) in g.cells.iter().enumerate().filter(|(_, c)| c.ran) {
        let share = if c.n > 0 {
            100.0 * c.syn_retransmitted as f64 / c.n as f64
        } else {
            0.0
        };
        let mut cols = vec![
            c.condition.clone(),
            c.server.clone(),
            c.n.to_string(),
            c.failed.to_string(),
            format!("{share:.1}% ({})", c.syn_retransmitted),
        ];
        if resuming {
            let other: Vec<String> = c
                .elsewhere
                .iter()
                .map(|(h, n)| format!("{h}: {n}"))
                .collect();
            cols.push(if other.is_empty() {
                "none".into()
            } else {
                other.join(", ")
            });
        }
        for m in 0..2 {
            for q in 0..3 {
                cols.push(
                    c.stats
                        .map_or("—".into(), |s| fmt_est(&s[m][q], mark(&g.cells, i, m, q))),
                );
            }
        }
        let _ = writeln!(out, "| {} |", cols.join(" | "));
    }
    let _ = writeln!(out, "\nAfter connect (what the server controls):\n");
    table_head(&mut out, &["condition"], &[2, 3]);
    for (i, c) in g.cells.iter().enumerate().filter(|(_, c)| c.ran) {
        let mut cols = vec![c.condition.clone()];
        for m in 2..4 {
            for q in 0..3 {
                cols.push(
                    c.stats
                        .map_or("—".into(), |s| fmt_est(&s[m][q], mark(&g.cells, i, m, q))),
                );
            }
        }
        let _ = writeln!(out, "| {} |", cols.join(" | "));
    }
    let base = &g.cells[plan.baseline.min(g.cells.len().saturating_sub(1))];
    let _ = writeln!(
        out,
        "\nRatio to the baseline ({}); `!` = intervals do not overlap:\n",
        base.condition
    );
    table_head(&mut out, &["condition"], &[0, 1, 2, 3]);
    for c in g.cells.iter().filter(|c| c.ran) {
        let mut cols = vec![c.condition.clone()];
        for m in 0..4 {
            for q in 0..3 {
                cols.push(match (c.stats, base.stats) {
                    (Some(s), Some(b)) if b[m][q].value > 0.0 => {
                        let sep = if s[m][q].separated_from(&b[m][q]) {
                            " !"
                        } else {
                            ""
                        };
                        format!("{:.2}{sep}", s[m][q].value / b[m][q].value)
                    }
                    _ => "—".into(),
                });
            }
        }
        let _ = writeln!(out, "| {} |", cols.join(" | "));
    }
    out
}

/// The handshake check (bench issue item 4): on the smallest size, per client and condition,
/// the medians of connect, appconnect − connect (≈ 1 RTT for TLS 1.3, even with a large
/// chain) and TTFB (≈ 3 RTT + server time), against the link's RTT.
pub fn render_handshake_check(plan: &Plan, rows: &[Row], chain_bytes: Option<usize>) -> String {
    let mut out = String::new();
    let rtt = plan.network.rtt_ms();
    let Some(&size) = plan.sizes.iter().min() else {
        return out;
    };
    let _ = writeln!(out, "## Handshake check\n");
    let chain = chain_bytes.map_or("unknown".into(), |b| format!("{b} bytes"));
    let _ = writeln!(
        out,
        "Certificate chain sent: {chain} ({}). RTT {rtt:.0} ms. Size {}. \
         Pass: appconnect − connect within [0.8, 1.3] RTT, and TTFB − 3 RTT (the server time) \
         between −5 ms and 0.3 RTT.\n",
        plan.tls.chain,
        size_label(size)
    );
    let _ = writeln!(out, "| client | condition | n | connect med | appconnect − connect med | in RTT | TTFB med | in RTT | server time | verdict |");
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
    for client in &plan.clients {
        for cond in &plan.conditions {
            let ok: Vec<&Row> = rows
                .iter()
                .filter(|r| {
                    r.ok() && r.size_bytes == size && r.client == client.name() && r.position <= 1
                })
                .filter(|r| r.condition == cond.name)
                .collect();
            let med = |v: Vec<f64>| quantile_sorted(&sorted(&v), 0.5);
            let connect = med(ok.iter().map(|r| r.connect_ms).collect());
            let hs = med(ok.iter().map(|r| r.appconnect_ms - r.connect_ms).collect());
            let ttfb = med(ok.iter().map(|r| r.ttfb_ms).collect());
            let (Some(connect), Some(hs), Some(ttfb)) = (connect, hs, ttfb) else {
                continue;
            };
            let server_time = ttfb - 3.0 * rtt;
            let pass = rtt > 0.0
                && (0.8 * rtt..=1.3 * rtt).contains(&hs)
                && (-5.0..=0.3 * rtt).contains(&server_time);
            let _ = writeln!(
                out,
                "| {} | {} | {} | {connect:.1} | {hs:.1} | {:.2} | {ttfb:.1} | {:.2} | {server_time:.1} | {} |",
                client.name(),
                cond.name,
                ok.len(),
                if rtt > 0.0 { hs / rtt } else { 0.0 },
                if rtt > 0.0 { ttfb / rtt } else { 0.0 },
                if pass { "pass" } else { "FAIL" }
            );
        }
    }
    out
}

/// Smallest sample for a `[compare]` verdict: percentile-bootstrap intervals of tail
/// quantiles from a handful of points are far too narrow (with n = 3 the "interval" of a p95
/// is nearly a point), so smaller cells say "n too small" instead of a verdict.
pub const MIN_N_FOR_VERDICT: usize = 20;

/// The verdict of a candidate against the best of the others in one column.
pub fn verdict(candidate: &Estimate, best: &Estimate) -> &'static str {
    if candidate.hi < best.lo {
        "better"
    } else if candidate.lo > best.hi {
        "WORSE"
    } else {
        "tie (noise)"
    }
}

/// `[compare]`: per group and column, the candidate against the best of the conditions it
/// is compared with: their values, the ratio, and whether the intervals separate them.
pub fn render_compare(plan: &Plan, groups: &[Group]) -> String {
    let Some((cand, against)) = &plan.compare else {
        return String::new();
    };
    let mut out = String::new();
    let names: Vec<&str> = against
        .iter()
        .map(|&i| plan.conditions[i].name.as_str())
        .collect();
    let _ = writeln!(
        out,
        "## {} against the best of {}\n\nPer column: the candidate, the best of the others \
         (lowest point value), the ratio, and the verdict (`better`/`WORSE` only when the 95% \
         intervals do not overlap).\n",
        plan.conditions[*cand].name,
        names.join(", ")
    );
    let _ = writeln!(
        out,
        "| size | client | metric | candidate | best other | ratio | verdict |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for g in groups {
        let Some(cand_cell) = g.cells.get(*cand) else {
            continue;
        };
        let Some(c) = cand_cell.stats else { continue };
        for m in 0..4 {
            for (q, qname) in ["med", "p95", "p99"].iter().enumerate() {
                let best = against
                    .iter()
                    .filter_map(|&i| {
                        g.cells
                            .get(i)
                            .and_then(|cell| cell.stats.map(|s| (i, s[m][q], cell.n)))
                    })
                    .min_by(|a, b| a.1.value.total_cmp(&b.1.value));
                let Some((bi, b, bn)) = best else { continue };
                let small = cand_cell.n.min(bn) < MIN_N_FOR_VERDICT;
                let ratio = if b.value > 0.0 {
                    c[m][q].value / b.value
                } else {
                    f64::NAN
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {} {qname} | {} | {} {} | {ratio:.2} | {} |",
                    size_label(g.size),
                    g.client,
                    METRICS[m],
                    fmt_est(&c[m][q], ""),
                    plan.conditions[bi].name,
                    fmt_est(&b, ""),
                    if small {
                        "n too small"
                    } else {
                        verdict(&c[m][q], &b)
                    }
                );
            }
        }
    }
    out.push('\n');
    out
}

/// The whole summary.md.
pub fn render(plan: &Plan, rows: &[Row], header: &str, chain_bytes: Option<usize>) -> String {
    let mut out = String::new();
    out.push_str(header);
    let _ = writeln!(
        out,
        "\nAll times in ms from the start of the connection: median, p95, p99, each with its \
         bootstrap 95% interval [lo, hi] ({} resamples, seeded). `*` best in the column, `**` \
         best with an interval clear of every other condition's. `SYN rtx`: share (count) of \
         requests whose connect needed a retransmitted SYN (each costs the 1 s initial RTO).\n",
        super::stats::BOOTSTRAP_RESAMPLES
    );
    let gs = groups(plan, rows);
    for g in &gs {
        out.push_str(&render_group(plan, g));
        out.push('\n');
    }
    out.push_str(&render_compare(plan, &gs));
    if plan.handshake_check {
        out.push_str(&render_handshake_check(plan, rows, chain_bytes));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = r#"
        seed = 1
        n = 40
        sizes = ["10k"]
        clients = ["curl-h2"]
        baseline = "slow"
        handshake_check = true
        [network]
        delay = "50ms"
        [[condition]]
        name = "slow"
        server = "firstbyte"
        [[condition]]
        name = "fast"
        server = "nginx"
    "#;

    fn rows(plan: &Plan) -> Vec<Row> {
        let mut out = Vec::new();
        for seq in 0..40u32 {
            for (cond, server, extra) in [("slow", "nginx", 100.0), ("fast", "firstbyte", 0.0)] {
                let jitter = f64::from(seq % 7);
                out.push(Row {
                    condition: cond.into(),
                    server: server.into(),
                    size_bytes: plan.sizes[0],
                    client: "curl-h2".into(),
                    seq,
                    connect_ms: 100.0 + if seq == 3 { 1000.0 } else { 0.0 },
                    appconnect_ms: 200.0 + jitter,
                    ttfb_ms: 303.0 + jitter + extra,
                    total_ms: 305.0 + jitter + extra,
                    syn_retransmits: u32::from(seq == 3),
                    http_version: "2".into(),
                    status: if seq == 39 { 0 } else { 200 },
                    gap_ms: 0.0,
                    position: 1,
                    handshake: "cold".into(),
                });
            }
        }
        out
    }

    #[test]
    fn cells_count_failures_and_syn_retransmits() {
        let plan = Plan::parse(PLAN, false).expect("plan");
        let g = groups(&plan, &rows(&plan));
        assert_eq!(g.len(), 1);
        let slow = &g[0].cells[0];
        assert_eq!((slow.n, slow.failed, slow.syn_retransmitted), (39, 1, 1));
        let s = slow.stats.expect("stats");
        assert!((s[0][0].value - 406.0).abs() < 1e-9, "{:?}", s[0][0]);
    }

    #[test]
    fn best_is_marked_and_clear_wins_double_marked() {
        let plan = Plan::parse(PLAN, false).expect("plan");
        let g = groups(&plan, &rows(&plan));
        assert_eq!(
            mark(&g[0].cells, 1, 0, 0),
            "**",
            "fast wins TTFB median by 100 ms"
        );
        assert_eq!(mark(&g[0].cells, 0, 0, 0), "");
        let text = render_group(&plan, &g[0]);
        assert!(text.contains("### 10 KB — curl-h2"), "{text}");
        assert!(
            text.contains("| fast | nginx | 39 | 1 | 2.6% (1) | ** 306.0"),
            "{text}"
        );
        assert!(text.contains("After connect"));
        // Ratio of fast to slow TTFB median is 306/406 = 0.75, beyond noise.
        assert!(text.contains("| fast | 0.75 !"), "{text}");
        assert!(text.contains("| slow | 1.00 |"), "{text}");
    }

    #[test]
    fn compare_gives_ratio_to_best_and_verdict() {
        let text = format!("{PLAN}\n[compare]\ncandidate = \"slow\"\nagainst = [\"fast\"]\n");
        let plan = Plan::parse(&text, false).expect("plan");
        let g = groups(&plan, &rows(&plan));
        let out = render_compare(&plan, &g);
        let line = out
            .lines()
            .find(|l| l.contains("| TTFB med |"))
            .expect("TTFB med row");
        assert!(line.contains("| fast 306.0"), "{line}");
        assert!(line.contains("| 1.33 | WORSE |"), "{line}");
        // Ten requests per cell: no verdict.
        let few: Vec<Row> = rows(&plan).into_iter().filter(|r| r.seq < 10).collect();
        let out = render_compare(&plan, &groups(&plan, &few));
        assert!(out.contains("| n too small |"), "{out}");
        assert!(!out.contains("| WORSE |"), "{out}");
        let a = Estimate {
            value: 1.0,
            lo: 0.9,
            hi: 1.1,
        };
        assert_eq!(
            verdict(
                &a,
                &Estimate {
                    value: 2.0,
                    lo: 1.5,
                    hi: 2.5
                }
            ),
            "better"
        );
        assert_eq!(
            verdict(
                &a,
                &Estimate {
                    value: 1.05,
                    lo: 1.0,
                    hi: 1.2
                }
            ),
            "tie (noise)"
        );
        assert_eq!(
            verdict(
                &Estimate {
                    value: 3.0,
                    lo: 2.9,
                    hi: 3.1
                },
                &a
            ),
            "WORSE"
        );
    }

    #[test]
    fn rejected_early_data_is_never_mixed_with_accepted() {
        let plan = Plan::parse(
            r#"
            seed = 1
            n = 10
            sizes = ["10k"]
            baseline = "fb"
            [[condition]]
            name = "fb"
            server = "firstbyte"
            clients = ["rust-h3", "rust-h3-0rtt"]
            [[condition]]
            name = "ng"
            server = "nginx"
            clients = ["rust-h2"]"#,
            false,
        )
        .expect("plan");
        let mut r = Vec::new();
        for seq in 0..10u32 {
            let rejected = seq % 3 == 0; // 4 of 10
            r.push(Row {
                condition: "fb".into(),
                server: "firstbyte".into(),
                size_bytes: 10240,
                client: "rust-h3-0rtt".into(),
                seq,
                connect_ms: 100.0,
                appconnect_ms: 100.0,
                ttfb_ms: if rejected { 300.0 } else { 101.0 },
                total_ms: if rejected { 301.0 } else { 102.0 },
                syn_retransmits: 0,
                http_version: "3".into(),
                status: 200,
                gap_ms: 0.0,
                position: 1,
                handshake: if rejected { "0rtt-rejected" } else { "0rtt" }.into(),
            });
        }
        let g = groups(&plan, &r);
        let names: Vec<&str> = g.iter().map(|g| g.client.as_str()).collect();
        assert_eq!(
            names,
            [
                "rust-h3",
                "rust-h3-0rtt",
                "rust-h2",
                "rust-h3-0rtt:0rtt-rejected"
            ]
        );
        let own = &g[1].cells[0];
        assert_eq!(own.n, 6);
        assert_eq!(own.elsewhere, [("0rtt-rejected".to_string(), 4)]);
        let s = own.stats.expect("stats");
        assert!((s[0][2].value - 101.0).abs() < 1e-9, "p99 of accepted only");
        assert_eq!(g[3].cells[0].n, 4);
        let text = render_group(&plan, &g[1]);
        assert!(text.contains("other handshake (own column)"), "{text}");
        assert!(
            text.contains("| fb | firstbyte | 6 | 0 | 0.0% (0) | 0rtt-rejected: 4 |"),
            "{text}"
        );
        // nginx does not run the client: no row for it.
        assert!(!text.contains("| ng |"), "{text}");
        assert!(!render_group(&plan, &g[0]).contains("other handshake"));
    }

    #[test]
    fn ties_are_single_marked() {
        let plan = Plan::parse(PLAN, false).expect("plan");
        let mut r = rows(&plan);
        for row in r.iter_mut() {
            row.ttfb_ms = 300.0;
        }
        let g = groups(&plan, &r);
        assert_eq!(mark(&g[0].cells, 0, 0, 0), "*");
        assert_eq!(mark(&g[0].cells, 1, 0, 0), "*");
    }

    #[test]
    fn handshake_check_passes_at_one_and_three_rtt() {
        let plan = Plan::parse(PLAN, false).expect("plan");
        let text = render_handshake_check(&plan, &rows(&plan), Some(6500));
        assert!(text.contains("6500 bytes"));
        let fast = text
            .lines()
            .find(|l| l.contains("| fast |"))
            .expect("fast row");
        assert!(fast.ends_with("| pass |"), "{fast}");
        let slow = text
            .lines()
            .find(|l| l.contains("| slow |"))
            .expect("slow row");
        assert!(slow.ends_with("| FAIL |"), "{slow}");
    }
}
