//! `results.csv`: one row per request, appended as the run goes, read back to resume and
//! to summarize.
//!
//! The header is fixed (other tools read it):
//! `condition,server,size_bytes,client,seq,connect_ms,appconnect_ms,ttfb_ms,total_ms,syn_retransmits,http_version,status,gap_ms,position,handshake`.
//! Times are ms from the start of the connection, three decimals — for a warm client's later
//! requests (`position` 2, 3, ... on the connection, after `gap_ms` idle) from the moment the
//! request was sent, with `connect_ms` and `appconnect_ms` 0. Files written before the last
//! two columns existed (12 columns) read as position 1, gap 0. `handshake` is what the
//! connection really had (`cold`, `full`, `resumed`, `0rtt`, `0rtt-rejected`, `no-0rtt`; see
//! `client::Handshake`), empty when a request failed before its handshake was known; files
//! written before it existed (14 columns) read with it empty. A failed request is a row
//! with status 0 (it is done; resuming does not retry it, and the summary counts it).
//! A torn last line (the run was killed mid-write) is ignored when reading.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

/// The header line, exactly.
pub const HEADER: &str = "condition,server,size_bytes,client,seq,connect_ms,appconnect_ms,ttfb_ms,total_ms,syn_retransmits,http_version,status,gap_ms,position,handshake";

/// The header before `handshake` was added; such files are still read.
const HEADER_14: &str = "condition,server,size_bytes,client,seq,connect_ms,appconnect_ms,ttfb_ms,total_ms,syn_retransmits,http_version,status,gap_ms,position";

/// The header before `gap_ms,position` were added; such files are still read.
const HEADER_12: &str = "condition,server,size_bytes,client,seq,connect_ms,appconnect_ms,ttfb_ms,total_ms,syn_retransmits,http_version,status";

/// One request's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Condition name.
    pub condition: String,
    /// Server kind (`firstbyte`, `nginx`).
    pub server: String,
    /// Response size requested.
    pub size_bytes: u64,
    /// Client name (`curl-h2`, ...).
    pub client: String,
    /// Repetition within the cell.
    pub seq: u32,
    /// TCP connected, ms.
    pub connect_ms: f64,
    /// TLS done, ms.
    pub appconnect_ms: f64,
    /// First response byte, ms.
    pub ttfb_ms: f64,
    /// Body done, ms.
    pub total_ms: f64,
    /// SYNs the client retransmitted for this connection (the client namespace's
    /// `TcpExt: TCPSynRetrans` counter before and after).
    pub syn_retransmits: u32,
    /// `2`, `1.1`, or empty.
    pub http_version: String,
    /// HTTP status, 0 for a failed request.
    pub status: u16,
    /// Idle time before this request on its connection, ms (0 for the first).
    pub gap_ms: f64,
    /// 1-based position of the request on its connection (1 = a cold connection).
    pub position: u32,
    /// The handshake the connection had (`client::Handshake::name`), or empty.
    pub handshake: String,
}

/// The identity of a request within a run: (condition, size, client, seq).
pub type Key = (String, u64, String, u32);

impl Row {
    /// Its identity, to skip it on resume.
    pub fn key(&self) -> Key {
        (
            self.condition.clone(),
            self.size_bytes,
            self.client.clone(),
            self.seq,
        )
    }

    /// The CSV line (no newline).
    pub fn to_csv(&self) -> String {
        format!(
            "{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{},{},{},{:.3},{},{}",
            self.condition,
            self.server,
            self.size_bytes,
            self.client,
            self.seq,
            self.connect_ms,
            self.appconnect_ms,
            self.ttfb_ms,
            self.total_ms,
            self.syn_retransmits,
            self.http_version,
            self.status,
            self.gap_ms,
            self.position,
            self.handshake
        )
    }

    /// Parses one CSV line; `None` if it is not a complete row.
    pub fn from_csv(line: &str) -> Option<Row> {
        let f: Vec<&str> = line.trim_end_matches(['\r', '\n']).split(',').collect();
        if f.len() != 12 && f.len() != 14 && f.len() != 15 {
            return None;
        }
        let num = |i: usize| f[i].parse::<f64>().ok().filter(|v| v.is_finite());
        Some(Row {
            condition: f[0].to_string(),
            server: f[1].to_string(),
            size_bytes: f[2].parse().ok()?,
            client: f[3].to_string(),
            seq: f[4].parse().ok()?,
            connect_ms: num(5)?,
            appconnect_ms: num(6)?,
            ttfb_ms: num(7)?,
            total_ms: num(8)?,
            syn_retransmits: f[9].parse().ok()?,
            http_version: f[10].to_string(),
            status: f[11].parse().ok()?,
            gap_ms: if f.len() >= 14 { num(12)? } else { 0.0 },
            position: if f.len() >= 14 {
                f[13].parse().ok()?
            } else {
                1
            },
            handshake: f.get(14).map_or(String::new(), |h| h.to_string()),
        })
    }

    /// The column of cells it belongs to: the client, or for a later request on a warm
    /// connection `client@GAPs` (see `Plan::series`). A successful request whose handshake
    /// is not the one its client measures (a rejected 0-RTT, a ticket not taken) goes to a
    /// column of its own, `client:HANDSHAKE` (`rust-h3-0rtt:0rtt-rejected`), so that the
    /// client's column never mixes them.
    pub fn series(&self) -> String {
        if self.position > 1 {
            return super::plan::series_name(&self.client, self.gap_ms);
        }
        let intended =
            super::client::ClientKind::from_name(&self.client).map(|k| k.intended().name());
        match intended {
            Some(want) if self.ok() && !self.handshake.is_empty() && self.handshake != want => {
                format!("{}:{}", self.client, self.handshake)
            }
            _ => self.client.clone(),
        }
    }

    /// Whether the request succeeded (2xx).
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// Errors reading results.csv.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResultsError {
    /// The file could not be read or written.
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    /// The first line is not `HEADER`.
    #[error("{0}: first line is not the results header")]
    Header(String),
}

/// Parses a results.csv text: the rows, skipping a torn or malformed line.
pub fn parse(text: &str) -> Result<Vec<Row>, &'static str> {
    let mut lines = text.lines();
    match lines.next() {
        None => return Ok(Vec::new()),
        Some(h) if [HEADER, HEADER_14, HEADER_12].contains(&h.trim_end()) => {}
        Some(_) => return Err("header"),
    }
    Ok(lines.filter_map(Row::from_csv).collect())
}

/// Reads results.csv; a missing file is an empty run.
pub fn read(path: &Path) -> Result<Vec<Row>, ResultsError> {
    let name = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text).map_err(|_| ResultsError::Header(name)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(ResultsError::Io(name, e)),
    }
}

/// The keys of the rows already recorded.
pub fn done_keys(rows: &[Row]) -> HashSet<Key> {
    rows.iter().map(Row::key).collect()
}

/// An append-only writer: writes the header to a new (or empty) file, cuts a torn last line,
/// and flushes every row so an interrupted run loses at most the request in flight.
pub struct Writer {
    file: std::fs::File,
}

impl Writer {
    /// Opens `path` for appending.
    pub fn open(path: &Path) -> Result<Writer, ResultsError> {
        let name = path.display().to_string();
        let existing = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(ResultsError::Io(name, e)),
        };
        if !existing.is_empty() && !existing.ends_with('\n') {
            // A torn last line: keep everything up to the last complete line.
            let keep = existing.rfind('\n').map_or(0, |i| i + 1);
            let f = std::fs::OpenOptions::new().write(true).open(path);
            f.and_then(|f| f.set_len(keep as u64))
                .map_err(|e| ResultsError::Io(name.clone(), e))?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| ResultsError::Io(name.clone(), e))?;
        let len = file
            .metadata()
            .map_err(|e| ResultsError::Io(name.clone(), e))?
            .len();
        if len == 0 {
            writeln!(file, "{HEADER}").map_err(|e| ResultsError::Io(name, e))?;
        } else if !existing.starts_with(&format!("{HEADER}\n")) {
            // An older file (12 or 14 columns) is read, never appended to.
            return Err(ResultsError::Header(name));
        }
        Ok(Writer { file })
    }

    /// Opens a file `open` has prepared (header written, torn line cut) for appending, and
    /// nothing else: what a lane's worker does while other lanes append to the same file
    /// (cutting a line another lane is writing would lose it).
    pub fn append_only(path: &Path) -> Result<Writer, ResultsError> {
        let name = path.display().to_string();
        let mut head = [0u8; HEADER.len() + 1];
        let file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .open(path)
            .map_err(|e| ResultsError::Io(name.clone(), e))?;
        let ok = std::io::Read::read_exact(&mut &file, &mut head).is_ok()
            && head == *format!("{HEADER}\n").as_bytes();
        if !ok {
            return Err(ResultsError::Header(name));
        }
        Ok(Writer { file })
    }

    /// Appends one row as ONE `write(2)` on the `O_APPEND` file: rows that lanes append at
    /// the same time never interleave (a regular file's append of one short buffer is
    /// atomic), and an interrupted run loses at most the request in flight.
    pub fn append(&mut self, row: &Row) -> std::io::Result<()> {
        let line = format!("{}\n", row.to_csv());
        let n = self.file.write(line.as_bytes())?;
        if n == line.len() {
            Ok(())
        } else {
            Err(std::io::Error::new(
                std::io::ErrorKind::WriteZero,
                format!("short write: {n} of {} bytes", line.len()),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: u32) -> Row {
        Row {
            condition: "baseline-16k".into(),
            server: "firstbyte".into(),
            size_bytes: 10240,
            client: "curl-h2".into(),
            seq,
            connect_ms: 100.25,
            appconnect_ms: 200.5,
            ttfb_ms: 305.125,
            total_ms: 306.0,
            syn_retransmits: 1,
            http_version: "2".into(),
            status: 200,
            gap_ms: 0.0,
            position: 1,
            handshake: "cold".into(),
        }
    }

    #[test]
    fn csv_round_trip() {
        let r = row(3);
        assert_eq!(Row::from_csv(&r.to_csv()), Some(r.clone()));
        assert_eq!(r.to_csv().split(',').count(), HEADER.split(',').count());
        assert!(Row::from_csv("a,b,c").is_none());
        assert!(Row::from_csv(&r.to_csv().replace(",200", ",2x0")).is_none());
    }

    #[test]
    fn file_round_trip_resume_and_torn_line() {
        let dir = std::env::temp_dir().join(format!("fb-bench-results-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let path = dir.join("results.csv");
        let _ = std::fs::remove_file(&path);
        assert!(read(&path).expect("missing file is empty").is_empty());
        {
            let mut w = Writer::open(&path).expect("open");
            w.append(&row(0)).expect("append");
            w.append(&row(1)).expect("append");
        }
        // Simulate a kill mid-write.
        let mut text = std::fs::read_to_string(&path).expect("read");
        text.push_str("baseline-16k,firstbyte,10240,cu");
        std::fs::write(&path, &text).expect("write");
        let rows = read(&path).expect("read back");
        assert_eq!(rows, vec![row(0), row(1)]);
        let done = done_keys(&rows);
        assert!(done.contains(&row(1).key()));
        assert!(!done.contains(&row(2).key()));
        // Reopening cuts the torn line and does not repeat the header.
        {
            let mut w = Writer::open(&path).expect("reopen");
            w.append(&row(2)).expect("append");
        }
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text.matches(HEADER).count(), 1);
        assert_eq!(read(&path).expect("read").len(), 3);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn lanes_append_whole_rows_to_one_file() {
        let dir = std::env::temp_dir().join(format!("fb-bench-lanes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let path = dir.join("results.csv");
        let _ = std::fs::remove_file(&path);
        // A worker cannot append to a file nobody prepared.
        assert!(Writer::append_only(&path).is_err());
        drop(Writer::open(&path).expect("prepare"));
        // Eight writers at once, as eight lanes' workers, 200 rows each.
        std::thread::scope(|s| {
            for lane in 0..8u32 {
                let path = &path;
                s.spawn(move || {
                    let mut w = Writer::append_only(path).expect("append_only");
                    for i in 0..200 {
                        let r = Row {
                            condition: format!("lane{lane}"),
                            ..row(i)
                        };
                        w.append(&r).expect("append");
                    }
                });
            }
        });
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text.matches(HEADER).count(), 1);
        let rows = read(&path).expect("read");
        assert_eq!(rows.len(), 1600, "a row torn or lost");
        assert_eq!(text.lines().count(), 1601);
        for lane in 0..8 {
            // Each lane's rows are all there, in its own order.
            let seqs: Vec<u32> = rows
                .iter()
                .filter(|r| r.condition == format!("lane{lane}"))
                .map(|r| r.seq)
                .collect();
            assert_eq!(seqs, (0..200).collect::<Vec<u32>>());
        }
        // A file of another header is refused.
        std::fs::write(&path, format!("{HEADER_14}\n")).expect("write");
        assert!(Writer::append_only(&path).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn older_files_read_and_warm_rows_name_their_series() {
        let old = format!(
            "{HEADER_12}\nbaseline-16k,firstbyte,10240,curl-h2,0,1.000,2.000,3.000,4.000,0,2,200\n"
        );
        let rows = parse(&old).expect("12 columns");
        assert_eq!((rows[0].position, rows[0].gap_ms), (1, 0.0));
        assert_eq!(rows[0].handshake, "");
        let old14 = format!(
            "{HEADER_14}\nb,firstbyte,10240,rust-h2,0,1.000,2.000,3.000,4.000,0,2,200,0.000,1\n"
        );
        let rows14 = parse(&old14).expect("14 columns");
        assert_eq!(
            (rows14[0].handshake.as_str(), rows14[0].series().as_str()),
            ("", "rust-h2")
        );
        assert_eq!(rows[0].series(), "curl-h2");
        let warm = Row {
            client: "rust-h2-warm".into(),
            gap_ms: 1500.0,
            position: 3,
            ..row(0)
        };
        assert_eq!(Row::from_csv(&warm.to_csv()), Some(warm.clone()));
        assert_eq!(warm.series(), "rust-h2-warm@1.5s");
        // An older file is read, never appended to (its header has 12 columns).
        let dir = std::env::temp_dir().join(format!("fb-bench-old-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let path = dir.join("results.csv");
        std::fs::write(&path, &old).expect("write");
        assert!(Writer::open(&path).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn samples_of_another_handshake_get_their_own_column() {
        let early = |handshake: &str, status| Row {
            client: "rust-h3-0rtt".into(),
            handshake: handshake.into(),
            status,
            ..row(0)
        };
        assert_eq!(early("0rtt", 200).series(), "rust-h3-0rtt");
        assert_eq!(
            early("0rtt-rejected", 200).series(),
            "rust-h3-0rtt:0rtt-rejected"
        );
        assert_eq!(early("no-0rtt", 200).series(), "rust-h3-0rtt:no-0rtt");
        // A failure counts against the client's own column, whatever the handshake.
        assert_eq!(early("0rtt-rejected", 0).series(), "rust-h3-0rtt");
        let resumed = Row {
            client: "rust-h2-resumed".into(),
            handshake: "full".into(),
            ..row(0)
        };
        assert_eq!(resumed.series(), "rust-h2-resumed:full");
        assert_eq!(row(0).series(), "curl-h2");
    }

    #[test]
    fn wrong_header_is_an_error() {
        assert!(parse("cond,size\nx,1\n").is_err());
        assert_eq!(parse("").map(|r| r.len()), Ok(0));
    }
}
