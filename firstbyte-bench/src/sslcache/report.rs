//! The bench's numbers: rows per measure, medians, the targets of issue 5, and the files
//! written to the output directory (`summary.md` with the table, `results.json` with every
//! raw value, `command.txt`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use serde_json::json;

use super::measure::TestRun;
use super::{Kind, Options};

/// The median of `v` (the mean of the middle two for an even count); zero when empty.
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `-t` runs of one config.
pub struct TestRow {
    /// What the config is.
    pub label: String,
    /// Certificate references in it.
    pub references: usize,
    /// Distinct certificate files.
    pub unique: usize,
    firstbyte: Vec<TestRun>,
    nginx: Vec<TestRun>,
}

impl TestRow {
    /// An empty row.
    pub fn new(label: &str, references: usize, unique: usize) -> Self {
        Self {
            label: label.to_string(),
            references,
            unique,
            firstbyte: Vec::new(),
            nginx: Vec::new(),
        }
    }

    /// Adds one run.
    pub fn push(&mut self, kind: Kind, r: TestRun) {
        match kind {
            Kind::Firstbyte => self.firstbyte.push(r),
            Kind::Nginx => self.nginx.push(r),
        }
    }

    fn runs(&self, kind: Kind) -> &[TestRun] {
        match kind {
            Kind::Firstbyte => &self.firstbyte,
            Kind::Nginx => &self.nginx,
        }
    }

    /// Median wall time of `kind`.
    pub fn median_wall(&self, kind: Kind) -> Duration {
        let v: Vec<f64> = self
            .runs(kind)
            .iter()
            .map(|r| r.wall.as_secs_f64())
            .collect();
        Duration::from_secs_f64(median(&v))
    }

    /// Median CPU time (user + system) of `kind`.
    pub fn median_cpu(&self, kind: Kind) -> Duration {
        let v: Vec<f64> = self
            .runs(kind)
            .iter()
            .map(|r| r.cpu.as_secs_f64())
            .collect();
        Duration::from_secs_f64(median(&v))
    }

    /// Median peak RSS of `kind`, MiB.
    pub fn median_rss_mib(&self, kind: Kind) -> f64 {
        let v: Vec<f64> = self
            .runs(kind)
            .iter()
            .map(|r| r.maxrss_kib as f64 / 1024.0)
            .collect();
        median(&v)
    }
}

/// Reload times of one kind of change.
pub struct ReloadRow {
    /// What changed.
    pub label: String,
    /// One per round.
    pub times: Vec<Duration>,
    /// The server's CPU time per round (all threads, the old site's teardown included).
    pub cpu: Vec<Duration>,
    /// The load's "ssl object cache" log line.
    pub cache_line: Option<String>,
}

impl ReloadRow {
    /// An empty row.
    pub fn new(label: &str) -> Self {
        Self {
            label: label.to_string(),
            times: Vec::new(),
            cpu: Vec::new(),
            cache_line: None,
        }
    }

    /// Median, ms.
    pub fn median_ms(&self) -> f64 {
        median(&self.times.iter().map(|d| ms(*d)).collect::<Vec<_>>())
    }

    /// Median CPU, ms.
    pub fn median_cpu_ms(&self) -> f64 {
        median(&self.cpu.iter().map(|d| ms(*d)).collect::<Vec<_>>())
    }
}

/// Handshake batches of one server block.
pub struct HandshakeRow {
    /// Which certificate setup.
    pub label: String,
    batches: Vec<(usize, Duration, Duration)>,
}

impl HandshakeRow {
    /// An empty row.
    pub fn new(label: &str) -> Self {
        Self {
            label: label.to_string(),
            batches: Vec::new(),
        }
    }

    /// Adds a batch: handshakes done, wall time, server CPU.
    pub fn push(&mut self, ok: usize, wall: Duration, cpu: Duration) {
        self.batches.push((ok, wall, cpu));
    }

    /// Median handshakes per second.
    pub fn rate(&self) -> f64 {
        median(
            &self
                .batches
                .iter()
                .map(|(n, w, _)| *n as f64 / w.as_secs_f64())
                .collect::<Vec<_>>(),
        )
    }

    /// Median server CPU per handshake, µs.
    pub fn cpu_us(&self) -> f64 {
        median(
            &self
                .batches
                .iter()
                .map(|(n, _, c)| c.as_secs_f64() * 1e6 / (*n).max(1) as f64)
                .collect::<Vec<_>>(),
        )
    }
}

/// Everything one run measured.
pub struct Report {
    command: String,
    firstbyte: PathBuf,
    rounds: usize,
    concurrency: usize,
    handshakes_per_batch: usize,
    /// `-t` rows.
    pub tests: Vec<TestRow>,
    /// (label, unique files, firstbyte Ir, nginx Ir).
    pub instructions: Vec<(String, usize, u64, u64)>,
    /// Reload rows (the first is the cold start).
    pub reloads: Vec<ReloadRow>,
    /// Handshake rows: static, then dynamic.
    pub handshakes: Vec<HandshakeRow>,
    /// firstbyte's `-t` of the server config (a cold load).
    pub cold_reference: Duration,
    /// Its CPU time.
    pub cold_cpu: Duration,
    /// Instructions of one no-change reload of the server config (callgrind), and of a cold
    /// `-t` of the same config.
    pub reload_instructions: Option<(u64, u64)>,
}

fn pct(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        0.0
    } else {
        100.0 * a / b
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "MISSED"
    }
}

impl Report {
    /// A report for a run with `args`.
    pub fn new(args: &[String], firstbyte: &Path, o: &Options) -> Self {
        Self {
            command: format!("firstbyte-bench sslcache {}", args.join(" ")),
            firstbyte: firstbyte.to_path_buf(),
            rounds: o.rounds,
            concurrency: o.concurrency,
            handshakes_per_batch: o.handshakes,
            tests: Vec::new(),
            instructions: Vec::new(),
            reloads: Vec::new(),
            handshakes: Vec::new(),
            cold_reference: Duration::ZERO,
            cold_cpu: Duration::ZERO,
            reload_instructions: None,
        }
    }

    /// The table, as Markdown.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "`{}`\n", self.command.trim());
        let _ = writeln!(
            s,
            "### `-t`: full configuration load (median of {} interleaved rounds)\n",
            self.rounds
        );
        s.push_str("| config | unique files | firstbyte ms | firstbyte peak RSS MiB | nginx 1.22 ms | nginx peak RSS MiB | firstbyte / nginx time |\n|---|---:|---:|---:|---:|---:|---:|\n");
        for r in &self.tests {
            let (f, n) = (r.median_wall(Kind::Firstbyte), r.median_wall(Kind::Nginx));
            let _ = writeln!(
                s,
                "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1}% |",
                r.label,
                r.unique,
                ms(f),
                r.median_rss_mib(Kind::Firstbyte),
                ms(n),
                r.median_rss_mib(Kind::Nginx),
                pct(ms(f), ms(n))
            );
        }
        if !self.instructions.is_empty() {
            s.push_str("\n### Instructions of `-t` (callgrind totals)\n\n| config | unique files | firstbyte Ir | nginx 1.22 Ir | firstbyte / nginx |\n|---|---:|---:|---:|---:|\n");
            for (label, unique, f, n) in &self.instructions {
                let _ = writeln!(
                    s,
                    "| {label} | {unique} | {f} | {n} | {:.1}% |",
                    pct(*f as f64, *n as f64)
                );
            }
        }
        if !self.reloads.is_empty() {
            let _ = writeln!(
                s,
                "\n### Reloads of the server config (SIGHUP to \"reconfiguration done\", median of {} rounds)\n",
                self.rounds
            );
            s.push_str(
                "| what | median ms | server CPU ms | ssl object cache line |\n|---|---:|---:|---|\n",
            );
            for r in &self.reloads {
                let line = r
                    .cache_line
                    .as_deref()
                    .and_then(|l| l.split("ssl object cache: ").nth(1))
                    .unwrap_or("");
                let cpu = if r.cpu.is_empty() {
                    "—".to_string()
                } else {
                    format!("{:.1}", r.median_cpu_ms())
                };
                let _ = writeln!(s, "| {} | {:.1} | {cpu} | {line} |", r.label, r.median_ms());
            }
            let _ = writeln!(
                s,
                "\nA cold `firstbyte -t` of the same config: {:.1} ms wall, {:.1} ms CPU (median).",
                ms(self.cold_reference),
                ms(self.cold_cpu)
            );
            if let Some((reload, cold)) = self.reload_instructions {
                let _ = writeln!(
                    s,
                    "Instructions (callgrind): one no-change reload {reload} Ir, a cold `-t` {cold} Ir ({:.1}%).",
                    pct(reload as f64, cold as f64)
                );
            }
        }
        if self.handshakes.len() == 2 {
            let _ = writeln!(
                s,
                "\n### Full TLS handshakes (no resumption, {} concurrent, {} per batch, median of {} interleaved batches)\n",
                self.concurrency, self.handshakes_per_batch, self.rounds
            );
            s.push_str(
                "| certificate | handshakes/s | server CPU µs per handshake |\n|---|---:|---:|\n",
            );
            for h in &self.handshakes {
                let _ = writeln!(s, "| {} | {:.0} | {:.1} |", h.label, h.rate(), h.cpu_us());
            }
        }
        s.push_str("\n### Targets (issue 5)\n\n");
        for t in self.targets() {
            let _ = writeln!(s, "- {t}");
        }
        s
    }

    fn targets(&self) -> Vec<String> {
        let mut v = Vec::new();
        let base = self
            .tests
            .iter()
            .find(|r| r.label.contains("baseline"))
            .map(|r| ms(r.median_wall(Kind::Firstbyte)));
        let loc: Vec<&TestRow> = self
            .tests
            .iter()
            .filter(|r| r.label.contains("% unique"))
            .collect();
        if let (Some(first), Some(last)) = (loc.first(), loc.last()) {
            let a = ms(first.median_wall(Kind::Firstbyte));
            let b = ms(last.median_wall(Kind::Firstbyte));
            let series: Vec<String> = loc
                .iter()
                .map(|r| {
                    format!(
                        "{:.0} ms at {} files",
                        ms(r.median_wall(Kind::Firstbyte)),
                        r.unique
                    )
                })
                .collect();
            v.push(format!(
                "load cost follows unique files, not references: {}{}",
                series.join(", "),
                base.map(|x| format!(" (no certificate: {x:.0} ms)"))
                    .unwrap_or_default()
            ));
            v.push(format!(
                "0% uniqueness ≤ 5% of 100% (whole `-t` wall time): {:.1}% — {}",
                pct(a, b),
                verdict(pct(a, b) <= 5.0)
            ));
            if let Some(x) = base {
                let p = pct(a - x, b - x);
                v.push(format!(
                    "the same, counting only what the certificates add over the baseline: {p:.1}% — {}",
                    verdict(p <= 5.0)
                ));
            }
        }
        let cg_base = self
            .instructions
            .iter()
            .find(|r| r.0.contains("baseline"))
            .map(|r| r.2 as f64);
        let cg: Vec<&(String, usize, u64, u64)> = self
            .instructions
            .iter()
            .filter(|r| r.0.contains("% unique"))
            .collect();
        if let (Some(first), Some(last)) = (cg.first(), cg.last()) {
            let p = pct(first.2 as f64, last.2 as f64);
            let extra = cg_base
                .map(|x| {
                    format!(
                        "; over the baseline: {:.1}%",
                        pct(first.2 as f64 - x, last.2 as f64 - x)
                    )
                })
                .unwrap_or_default();
            v.push(format!(
                "0% uniqueness ≤ 5% of 100% (instructions, {}): {p:.1}%{extra} — {}",
                first.0.split(',').next().unwrap_or(""),
                verdict(p <= 5.0)
            ));
        }
        if self.reloads.len() >= 4 {
            let none = self.reloads[1].median_ms();
            let all = self.reloads[3].median_ms();
            let cold = ms(self.cold_reference);
            v.push(format!(
                "no-change reload ≤ 10% of a cold load, by wall time: {none:.1} ms = {:.1}% of `firstbyte -t` ({cold:.1} ms), {:.1}% of a reload that parses every file ({all:.1} ms) — {}",
                pct(none, cold),
                pct(none, all),
                verdict(pct(none, cold) <= 10.0)
            ));
            if !self.reloads[1].cpu.is_empty() && !self.cold_cpu.is_zero() {
                let cpu = self.reloads[1].median_cpu_ms();
                let cold = ms(self.cold_cpu);
                v.push(format!(
                    "the same by CPU time: {cpu:.1} ms = {:.1}% of `-t`'s {cold:.1} ms — {}",
                    pct(cpu, cold),
                    verdict(pct(cpu, cold) <= 10.0)
                ));
            }
            if let Some((reload, cold)) = self.reload_instructions {
                let p = pct(reload as f64, cold as f64);
                v.push(format!(
                    "the same by instructions: {reload} Ir = {p:.1}% of `-t`'s {cold} Ir — {}",
                    verdict(p <= 10.0)
                ));
            }
        }
        if self.handshakes.len() == 2 {
            let (s, d) = (&self.handshakes[0], &self.handshakes[1]);
            let rate = pct(d.rate(), s.rate());
            let cpu = pct(s.cpu_us(), d.cpu_us());
            v.push(format!(
                "dynamic handshakes ≥ 95% of static: {rate:.1}% of the rate, {cpu:.1}% by server CPU per handshake (static ÷ dynamic) — {}",
                verdict(rate >= 95.0 && cpu >= 95.0)
            ));
        }
        v
    }

    /// Writes `summary.md`, `results.json` and `command.txt` into `out`.
    pub fn write(&self, out: &Path, table: &str) -> Result<()> {
        std::fs::write(out.join("summary.md"), table)?;
        std::fs::write(
            out.join("command.txt"),
            format!("{}\n", self.command.trim()),
        )?;
        let tests: Vec<_> = self
            .tests
            .iter()
            .map(|r| {
                let runs = |k: Kind| -> Vec<_> {
                    r.runs(k)
                        .iter()
                        .map(|t| json!({"wall_ms": ms(t.wall), "cpu_ms": ms(t.cpu), "maxrss_kib": t.maxrss_kib}))
                        .collect()
                };
                json!({"config": r.label, "references": r.references, "unique": r.unique,
                       "firstbyte": runs(Kind::Firstbyte), "nginx": runs(Kind::Nginx)})
            })
            .collect();
        let instructions: Vec<_> = self
            .instructions
            .iter()
            .map(|(l, u, f, n)| json!({"config": l, "unique": u, "firstbyte_ir": f, "nginx_ir": n}))
            .collect();
        let reloads: Vec<_> = self
            .reloads
            .iter()
            .map(|r| json!({"what": r.label, "ms": r.times.iter().map(|d| ms(*d)).collect::<Vec<_>>(), "cpu_ms": r.cpu.iter().map(|d| ms(*d)).collect::<Vec<_>>(), "cache_line": r.cache_line}))
            .collect();
        let handshakes: Vec<_> = self
            .handshakes
            .iter()
            .map(|h| {
                json!({"certificate": h.label, "batches": h.batches.iter().map(|(n, w, c)| json!({"ok": n, "wall_ms": ms(*w), "server_cpu_ms": ms(*c)})).collect::<Vec<_>>()})
            })
            .collect();
        let v = json!({
            "command": self.command.trim(),
            "firstbyte": self.firstbyte.display().to_string(),
            "rounds": self.rounds,
            "test": tests,
            "instructions": instructions,
            "reloads": reloads,
            "firstbyte_t_servers_ms": ms(self.cold_reference),
            "firstbyte_t_servers_cpu_ms": ms(self.cold_cpu),
            "reload_instructions": self.reload_instructions.map(|(r, c)| json!({"no_change_reload_ir": r, "cold_t_ir": c})),
            "handshakes": handshakes,
            "targets": self.targets(),
        });
        std::fs::write(out.join("results.json"), serde_json::to_string_pretty(&v)?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn handshake_row_rates() {
        let mut h = HandshakeRow::new("x");
        h.push(1000, Duration::from_secs(1), Duration::from_millis(100));
        h.push(2000, Duration::from_secs(1), Duration::from_millis(100));
        h.push(3000, Duration::from_secs(1), Duration::from_millis(300));
        assert_eq!(h.rate(), 2000.0);
        assert!((h.cpu_us() - 100.0).abs() < 1e-9);
    }
}
