//! Progress lines with an ETA on stderr, for the long benches.
//!
//! `run` counts requests of one kind ([`progress_line`]). The other benches take steps of
//! several kinds that last very differently (a 1 GiB download, a thousand handshakes, a
//! callgrind run), so [`Progress`] keeps one [`Phase`] per kind: the ETA is each phase's
//! remaining steps at that phase's mean time so far, and for a phase not started yet the mean
//! step of all phases ([`remaining_s`], pure). Lines look like `run`'s:
//! `[12/42] 28.6%  elapsed 1m05s  ETA 2m44s`, printed for the first steps, then at most every
//! 15 s, and for the last step.

use std::time::{Duration, Instant};

/// Least time between two progress lines after the first few: 15 s, as `run` prints.
pub const PRINT_EVERY: Duration = Duration::from_secs(15);

/// Steps printed unconditionally at the start (an early ETA shows the run's length).
const FIRST_STEPS: usize = 3;

/// Progress and ETA from counts and elapsed time (pure): `done_here` of the `done` steps
/// were taken in this process, in `elapsed_s`.
pub fn progress_line(done: usize, total: usize, done_here: usize, elapsed_s: f64) -> String {
    let eta = if done_here > 0 {
        let per = elapsed_s / done_here as f64;
        format!(
            "{} ({:.2} s/request)",
            fmt_duration(per * total.saturating_sub(done) as f64),
            per
        )
    } else {
        "?".into()
    };
    format!(
        "{}  elapsed {}  ETA {eta}",
        counts(done, total),
        fmt_duration(elapsed_s)
    )
}

fn counts(done: usize, total: usize) -> String {
    let pct = if total > 0 {
        100.0 * done as f64 / total as f64
    } else {
        100.0
    };
    format!("[{done}/{total}] {pct:.1}%")
}

/// `3h05m`, `12m30s`, `45s`.
pub fn fmt_duration(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// Steps of one kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// What the steps are (a measure key, `-t`, `callgrind`, ...).
    pub name: &'static str,
    /// Steps of this kind in the whole run.
    pub total: usize,
    /// Steps done.
    pub done: usize,
    /// Seconds the done steps took.
    pub spent_s: f64,
}

/// Seconds left (pure): each phase's remaining steps at its own mean step time, or at the
/// mean over every step done when the phase has none yet. `None` before the first step.
pub fn remaining_s(phases: &[Phase]) -> Option<f64> {
    let done: usize = phases.iter().map(|p| p.done).sum();
    if done == 0 {
        return None;
    }
    let overall = phases.iter().map(|p| p.spent_s).sum::<f64>() / done as f64;
    Some(
        phases
            .iter()
            .map(|p| {
                let per = if p.done > 0 {
                    p.spent_s / p.done as f64
                } else {
                    overall
                };
                per * p.total.saturating_sub(p.done) as f64
            })
            .sum(),
    )
}

/// The progress line of `phases` after `elapsed_s` (pure).
pub fn phase_line(phases: &[Phase], elapsed_s: f64) -> String {
    let done = phases.iter().map(|p| p.done).sum();
    let total = phases.iter().map(|p| p.total).sum();
    let eta = remaining_s(phases).map_or_else(|| "?".to_string(), fmt_duration);
    format!(
        "{}  elapsed {}  ETA {eta}",
        counts(done, total),
        fmt_duration(elapsed_s)
    )
}

/// Progress of a run made of phases; [`Progress::step`] after each step prints the line
/// (prefixed with the bench's name) when it is due.
#[derive(Debug)]
pub struct Progress {
    prefix: &'static str,
    phases: Vec<Phase>,
    started: Instant,
    last_step: Instant,
    last_print: Option<Instant>,
}

impl Progress {
    /// A run of `phases` (name, number of steps), starting now.
    pub fn new(prefix: &'static str, phases: &[(&'static str, usize)]) -> Self {
        let now = Instant::now();
        Progress {
            prefix,
            phases: phases
                .iter()
                .map(|&(name, total)| Phase {
                    name,
                    total,
                    done: 0,
                    spent_s: 0.0,
                })
                .collect(),
            started: now,
            last_step: now,
            last_print: None,
        }
    }

    /// Counts one step of `phase` (the time since the previous step is its cost) and prints
    /// the progress line if it is due. An unknown phase name counts toward the time only.
    pub fn step(&mut self, phase: &str) {
        let now = Instant::now();
        let took = now.duration_since(self.last_step).as_secs_f64();
        self.last_step = now;
        if let Some(p) = self.phases.iter_mut().find(|p| p.name == phase) {
            p.done += 1;
            p.spent_s += took;
        }
        let done: usize = self.phases.iter().map(|p| p.done).sum();
        let total: usize = self.phases.iter().map(|p| p.total).sum();
        let due = done <= FIRST_STEPS
            || done >= total
            || self
                .last_print
                .is_none_or(|t| now.duration_since(t) >= PRINT_EVERY);
        if due {
            eprintln!(
                "{}: {}",
                self.prefix,
                phase_line(&self.phases, self.started.elapsed().as_secs_f64())
            );
            self.last_print = Some(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(name: &'static str, total: usize, done: usize, spent_s: f64) -> Phase {
        Phase {
            name,
            total,
            done,
            spent_s,
        }
    }

    #[test]
    fn progress_and_eta() {
        assert_eq!(fmt_duration(45.2), "45s");
        assert_eq!(fmt_duration(750.0), "12m30s");
        assert_eq!(fmt_duration(11100.0), "3h05m");
        let l = progress_line(150, 200, 50, 100.0);
        assert!(l.starts_with("[150/200] 75.0%"), "{l}");
        assert!(l.contains("ETA 1m40s (2.00 s/request)"), "{l}");
        assert!(progress_line(0, 10, 0, 0.0).contains("ETA ?"));
    }

    #[test]
    fn each_phase_at_its_own_pace() {
        // 2 of 4 bulk steps at 10 s, 1 of 4 handshake steps at 2 s, 3 idle steps not
        // started: 2×10 + 3×2 + 3×(22/3) = 48 s.
        let phases = [
            phase("bulk", 4, 2, 20.0),
            phase("handshake", 4, 1, 2.0),
            phase("idle", 3, 0, 0.0),
        ];
        let left = remaining_s(&phases).expect("steps done");
        assert!((left - 48.0).abs() < 1e-9, "{left}");
        let l = phase_line(&phases, 22.0);
        assert_eq!(l, "[3/11] 27.3%  elapsed 22s  ETA 48s");
    }

    #[test]
    fn no_eta_before_the_first_step_and_none_left_at_the_end() {
        let phases = [phase("a", 2, 0, 0.0)];
        assert_eq!(remaining_s(&phases), None);
        assert!(phase_line(&phases, 0.0).ends_with("ETA ?"));
        let phases = [phase("a", 2, 2, 5.0)];
        assert_eq!(remaining_s(&phases), Some(0.0));
        assert!(phase_line(&phases, 5.0).starts_with("[2/2] 100.0%"));
    }

    #[test]
    fn steps_are_counted_per_phase() {
        let mut p = Progress::new("test", &[("a", 2), ("b", 1)]);
        p.step("a");
        p.step("b");
        p.step("elsewhere");
        assert_eq!(p.phases[0].done, 1);
        assert_eq!(p.phases[1].done, 1);
        assert!(p.last_print.is_some());
    }
}
