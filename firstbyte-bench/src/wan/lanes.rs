//! Lanes: `run --lanes N` runs a link's jobs through N emulators at once.
//!
//! A warm job is mostly idle waiting (7.3 s of gaps on one connection), so N independent
//! emulated links — each `firstbyte-netem` instance unshares its own anonymous namespaces,
//! with its own servers and its own worker — finish a link's jobs about N times sooner. Lane
//! `L` of `N` takes the jobs whose `seq % N == L`, in the plan's shuffled order: every cell
//! sees every lane alike. The lanes share the served files, the certificates and
//! `results.csv` (each row is one `write(2)` on an `O_APPEND` file, see
//! `results::Writer`); what would collide (configs, pid files, error logs, server output,
//! the emulator's statistics) gets a `-laneL` suffix. One lane (the default) names every
//! file as a run without lanes does.

use super::plan::Job;

/// Which lane of how many a process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lane {
    /// This lane, `0..count`.
    pub index: usize,
    /// How many lanes the link runs.
    pub count: usize,
}

impl Lane {
    /// The only lane of a run without lanes.
    pub const ONE: Lane = Lane { index: 0, count: 1 };

    /// Every lane of `count`.
    pub fn all(count: usize) -> Vec<Lane> {
        if count <= 1 {
            return vec![Lane::ONE];
        }
        (0..count).map(|index| Lane { index, count }).collect()
    }

    /// Whether this lane runs a job: `seq % count == index`.
    pub fn takes(&self, job: &Job) -> bool {
        self.takes_seq(job.seq)
    }

    /// Whether this lane runs the jobs (and so wrote the rows) of repetition `seq`.
    pub fn takes_seq(&self, seq: u32) -> bool {
        seq as usize % self.count == self.index
    }

    /// The suffix of this lane's own files: `-laneL`, or nothing with one lane.
    pub fn suffix(&self) -> String {
        if self.count > 1 {
            format!("-lane{}", self.index)
        } else {
            String::new()
        }
    }

    /// A per-lane file or directory name: the suffix before the extension (`nginx.pid` →
    /// `nginx-lane3.pid`), before a trailing `/` (`nginx/` → `nginx-lane3/`), or at the end
    /// (`Caddyfile` → `Caddyfile-lane3`). Unchanged with one lane.
    pub fn file(&self, name: &str) -> String {
        let suffix = self.suffix();
        if let Some(dir) = name.strip_suffix('/') {
            return format!("{dir}{suffix}/");
        }
        match name.rfind('.') {
            Some(dot) if dot > 0 => format!("{}{suffix}{}", &name[..dot], &name[dot..]),
            _ => format!("{name}{suffix}"),
        }
    }

    /// The emulator's statistics file of a session that starts with `done` rows recorded:
    /// `netem-000000.json`, per lane `netem-lane3-000000.json`.
    pub fn stats_name(&self, done: usize) -> String {
        if self.count > 1 {
            format!("netem-lane{}-{done:06}.json", self.index)
        } else {
            format!("netem-{done:06}.json")
        }
    }

    /// The emulator's `--seed` for a session starting with `done` of this lane's rows
    /// recorded: `plan seed ^ done` with one lane (as without lanes); with more, the lane
    /// number (plus one) in the upper 32 bits as well, so that no two lanes, and no two
    /// sessions of one lane, draw the same loss pattern.
    pub fn netem_seed(&self, plan_seed: u64, done: usize) -> u64 {
        let base = plan_seed ^ done as u64;
        if self.count > 1 {
            base ^ ((self.index as u64 + 1) << 32)
        } else {
            base
        }
    }

    /// The worker's extra arguments (`--lanes N --lane L`), none with one lane.
    pub fn worker_args(&self) -> Vec<String> {
        if self.count > 1 {
            vec![
                "--lanes".into(),
                self.count.to_string(),
                "--lane".into(),
                self.index.to_string(),
            ]
        } else {
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wan::plan::Plan;

    fn plan() -> Plan {
        Plan::parse(
            r#"seed = 9
            n = 10
            sizes = ["10k", "1m"]
            clients = ["rust-h2-warm"]
            gaps = ["200ms"]
            baseline = "a"
            [[condition]]
            name = "a"
            server = "firstbyte"
            [[condition]]
            name = "b"
            server = "nginx""#,
            false,
        )
        .expect("plan")
    }

    #[test]
    fn lanes_split_the_jobs_exactly_once_in_run_order() {
        let jobs = plan().jobs();
        assert_eq!(jobs.len(), 40);
        for count in [1, 2, 3, 8, 16] {
            let lanes = Lane::all(count);
            assert_eq!(lanes.len(), count);
            let mut seen = 0;
            for lane in &lanes {
                let mine: Vec<&Job> = jobs.iter().filter(|j| lane.takes(j)).collect();
                seen += mine.len();
                // Each lane keeps the plan's order (a subsequence of the shuffle).
                let mut pos = jobs.iter().enumerate();
                for j in &mine {
                    assert!(pos.any(|(_, x)| x == *j), "lane {lane:?} out of order");
                }
                assert!(mine.iter().all(|j| j.seq as usize % count == lane.index));
            }
            assert_eq!(seen, jobs.len(), "{count} lanes");
        }
        // Every cell sees every lane alike: 10 seqs over 2 lanes is 5 + 5 per cell.
        let lane0 = Lane { index: 0, count: 2 };
        let cell_a_10k = jobs
            .iter()
            .filter(|j| j.condition == 0 && j.size == 10240 && lane0.takes(j))
            .count();
        assert_eq!(cell_a_10k, 5);
        assert_eq!(Lane::all(0), vec![Lane::ONE]);
    }

    #[test]
    fn file_names_get_a_suffix_only_with_lanes() {
        let one = Lane::ONE;
        for name in ["nginx.pid", "nginx/", "Caddyfile", "firstbyte-error.log"] {
            assert_eq!(one.file(name), name);
        }
        assert_eq!(one.stats_name(42), "netem-000042.json");
        assert!(one.worker_args().is_empty());
        let l = Lane { index: 3, count: 8 };
        assert_eq!(l.file("nginx.pid"), "nginx-lane3.pid");
        assert_eq!(l.file("firstbyte-error.log"), "firstbyte-error-lane3.log");
        assert_eq!(l.file("nginx/"), "nginx-lane3/");
        assert_eq!(l.file("caddy"), "caddy-lane3");
        assert_eq!(l.file("Caddyfile"), "Caddyfile-lane3");
        assert_eq!(l.file(".hidden"), ".hidden-lane3");
        assert_eq!(l.stats_name(0), "netem-lane3-000000.json");
        // The summary's link section reads every `netem-*.json`.
        assert!(l.stats_name(7).starts_with("netem-") && l.stats_name(7).ends_with(".json"));
        assert_eq!(l.worker_args(), ["--lanes", "8", "--lane", "3"]);
    }

    #[test]
    fn seeds_differ_per_lane_and_session_and_one_lane_keeps_the_old_seed() {
        let seed = 20_261_124;
        assert_eq!(Lane::ONE.netem_seed(seed, 0), seed);
        assert_eq!(Lane::ONE.netem_seed(seed, 1050), seed ^ 1050);
        let mut seen = std::collections::HashSet::new();
        for lane in Lane::all(16) {
            for done in [0, 1, 5, 1050, 52_500] {
                assert!(seen.insert(lane.netem_seed(seed, done)), "{lane:?} {done}");
            }
        }
        // Nor does any lane's seed repeat a one-lane run's.
        for done in [0, 1, 5, 1050, 52_500] {
            assert!(!seen.contains(&Lane::ONE.netem_seed(seed, done)));
        }
    }
}
