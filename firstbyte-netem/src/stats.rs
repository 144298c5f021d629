//! Counters per direction, and the report printed to stderr and written as JSON at exit.
//!
//! Each forwarding thread owns one [`DirectionStats`] and returns it when it stops; `main`
//! puts the two in a [`Report`], which renders as text for people and as JSON for the test
//! suite and the benchmark (`--stats-json`). Lateness is how long after its due time a packet
//! actually left the emulator.

use serde::Serialize;

use crate::hist::Histogram;
use crate::units::human_bytes;

/// What one direction saw.
#[derive(Debug, Clone, Default)]
pub struct DirectionStats {
    /// Packets read from the ingress TUN device.
    pub packets_in: u64,
    /// Bytes (IP packets) read from the ingress TUN device.
    pub bytes_in: u64,
    /// Packets written to the egress TUN device.
    pub packets_out: u64,
    /// Bytes written to the egress TUN device.
    pub bytes_out: u64,
    /// Packets dropped by the loss model.
    pub dropped_loss: u64,
    /// Packets dropped because the queue was full.
    pub dropped_queue: u64,
    /// Packets the egress device refused.
    pub write_errors: u64,
    /// Packets still held when the emulator stopped.
    pub held_at_exit: u64,
    /// Lateness of each packet that left, ns.
    pub lateness_ns: Histogram,
    /// Whether the forwarding thread ran under SCHED_FIFO (needs privilege).
    pub realtime: bool,
    /// How long the forwarding thread waited for a CPU while runnable, ns (None: unknown).
    pub run_delay_ns: Option<u64>,
}

/// Lateness percentiles in microseconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Lateness {
    /// Packets measured.
    pub count: u64,
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Maximum.
    pub max_us: f64,
}

/// The JSON shape of one direction's counters.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DirectionReport {
    /// Packets read from the ingress TUN device.
    pub packets_in: u64,
    /// Bytes read from the ingress TUN device.
    pub bytes_in: u64,
    /// Packets delivered.
    pub packets_out: u64,
    /// Bytes delivered.
    pub bytes_out: u64,
    /// Drops by the loss model.
    pub dropped_loss: u64,
    /// Drops by the full queue.
    pub dropped_queue: u64,
    /// Packets the egress device refused.
    pub write_errors: u64,
    /// Packets still held at exit.
    pub held_at_exit: u64,
    /// How late packets left.
    pub lateness: Lateness,
    /// Whether the forwarding thread ran under SCHED_FIFO.
    pub realtime: bool,
    /// How long the forwarding thread waited for a CPU while runnable, ms (null: unknown).
    /// Lateness beyond this and [`Report::steal_ms`] is the emulator's own.
    pub run_delay_ms: Option<f64>,
}

impl DirectionStats {
    /// The JSON shape of these counters.
    pub fn report(&self) -> DirectionReport {
        let h = &self.lateness_ns;
        let us = |ns: u64| ns as f64 / 1e3;
        DirectionReport {
            packets_in: self.packets_in,
            bytes_in: self.bytes_in,
            packets_out: self.packets_out,
            bytes_out: self.bytes_out,
            dropped_loss: self.dropped_loss,
            dropped_queue: self.dropped_queue,
            write_errors: self.write_errors,
            held_at_exit: self.held_at_exit,
            lateness: Lateness {
                count: h.count(),
                mean_us: h.mean() / 1e3,
                p50_us: us(h.quantile(0.5)),
                p90_us: us(h.quantile(0.9)),
                p99_us: us(h.quantile(0.99)),
                p999_us: us(h.quantile(0.999)),
                max_us: us(h.max()),
            },
            realtime: self.realtime,
            run_delay_ms: self.run_delay_ns.map(|ns| ns as f64 / 1e6),
        }
    }
}

/// The emulated link's settings, recorded beside the counters.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LinkInfo {
    /// Server-side TUN device (inside the server namespace).
    pub server_dev: String,
    /// Client-side TUN device (inside the client namespace).
    pub client_dev: String,
    /// One-way delay, µs.
    pub delay_us: f64,
    /// Jitter amplitude, µs.
    pub jitter_us: f64,
    /// Long-run loss fraction of the loss model, per direction.
    pub mean_loss: f64,
    /// Bottleneck rate, bit/s (null: none).
    pub rate_bps: Option<u64>,
    /// Bottleneck queue, packets.
    pub queue_packets: usize,
    /// MTU of both TUN devices.
    pub mtu: u32,
    /// Congestion control in the server namespace.
    pub cc: String,
    /// Seed of the random draws (rerun with `--seed` to repeat them).
    pub seed: u64,
}

/// Everything reported at exit.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    /// Address of the server side.
    pub server_addr: String,
    /// Address of the client side.
    pub client_addr: String,
    /// The link's settings.
    pub link: LinkInfo,
    /// Seconds the link was up.
    pub elapsed_s: f64,
    /// CPU time the hypervisor took from this machine while the link was up, ms, summed over
    /// CPUs (null: the kernel does not say). Packets are late by whatever a stolen CPU misses.
    pub steal_ms: Option<f64>,
    /// The client's exit code (128 + signal if it was killed), if it ran to the end.
    pub client_exit_code: Option<i32>,
    /// Client → server.
    pub client_to_server: DirectionReport,
    /// Server → client.
    pub server_to_client: DirectionReport,
}

impl DirectionReport {
    /// One line for people.
    fn line(&self, name: &str) -> String {
        let l = &self.lateness;
        format!(
            "{name}: {} packets ({}) in, {} out, dropped {} loss + {} queue; \
             lateness p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            self.packets_in,
            human_bytes(self.bytes_in),
            self.packets_out,
            self.dropped_loss,
            self.dropped_queue,
            l.p50_us / 1e3,
            l.p99_us / 1e3,
            l.max_us / 1e3,
        )
    }
}

impl Report {
    /// The counters as text for stderr.
    pub fn to_text(&self) -> String {
        format!(
            "firstbyte-netem: {:.1} s{}, client {} <-> server {}\n  {}\n  {}\n",
            self.elapsed_s,
            self.steal_ms
                .filter(|&ms| ms > 0.0)
                .map_or(String::new(), |ms| format!(
                    " ({ms:.0} ms stolen by the host)"
                )),
            self.client_addr,
            self.server_addr,
            self.client_to_server.line("client->server"),
            self.server_to_client.line("server->client"),
        )
    }

    /// The counters as pretty JSON.
    pub fn to_json(&self) -> String {
        // Serializing plain numbers and strings cannot fail; fall back to an empty object.
        serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> DirectionStats {
        let mut s = DirectionStats {
            packets_in: 10,
            bytes_in: 15_000,
            packets_out: 8,
            bytes_out: 12_000,
            dropped_loss: 1,
            dropped_queue: 1,
            ..Default::default()
        };
        for ns in [
            100_000, 200_000, 300_000, 400_000, 500_000, 600_000, 700_000, 2_000_000,
        ] {
            s.lateness_ns.record(ns);
        }
        s
    }

    #[test]
    fn report_converts_to_microseconds() {
        let r = sample().report();
        assert_eq!(r.lateness.count, 8);
        assert_eq!(r.lateness.max_us, 2_000.0);
        assert!(r.lateness.p50_us >= 400.0 && r.lateness.p50_us < 410.0);
        assert_eq!(r.lateness.p99_us, 2_000.0);
    }

    #[test]
    fn json_and_text_carry_the_counters() {
        let report = Report {
            server_addr: "198.18.0.1".into(),
            client_addr: "198.18.0.2".into(),
            link: LinkInfo {
                server_dev: "fbn0s".into(),
                client_dev: "fbn0c".into(),
                delay_us: 50_000.0,
                jitter_us: 0.0,
                mean_loss: 0.01,
                rate_bps: None,
                queue_packets: 1000,
                mtu: 1500,
                cc: "cubic".into(),
                seed: 1,
            },
            elapsed_s: 1.5,
            steal_ms: Some(30.0),
            client_exit_code: Some(0),
            client_to_server: sample().report(),
            server_to_client: DirectionStats::default().report(),
        };
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap_or_default();
        assert_eq!(json["client_to_server"]["dropped_queue"], 1);
        assert_eq!(json["client_to_server"]["packets_in"], 10);
        assert_eq!(json["server_addr"], "198.18.0.1");
        assert_eq!(json["client_exit_code"], 0);
        assert_eq!(json["link"]["delay_us"], 50_000.0);
        assert!(json["link"]["rate_bps"].is_null());
        assert_eq!(json["steal_ms"], 30.0);
        assert_eq!(json["client_to_server"]["realtime"], false);
        assert!(json["client_to_server"]["run_delay_ms"].is_null());
        let text = report.to_text();
        assert!(text.contains("1.5 s (30 ms stolen by the host)"), "{text}");
        assert!(text
            .contains("client->server: 10 packets (15.0 kB) in, 8 out, dropped 1 loss + 1 queue"));
        assert!(text.contains("p99 2.000 ms"), "{text}");
    }
}
