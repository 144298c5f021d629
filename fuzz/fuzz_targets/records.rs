//! The record-size policies (`static`, `dynamic`, `adaptive`) driven as the TLS stream drives
//! them: arbitrary settings (unchecked, zero and huge sizes included), then a sequence of
//! writes, each split into records as the stream does, with arbitrary clock steps (tiny, huge,
//! backwards) and arbitrary `TCP_INFO` readings (zero MSS or window, huge RTTs). Besides never
//! panicking or overflowing:
//! - every record size is 1..=16384 and at most the clamped `ssl_buffer_size`;
//! - `static` always gives `ssl_buffer_size`; `dynamic` only its three sizes.

#![no_main]

use std::time::{Duration, Instant};

use firstbyte::fuzzing::{DynRecMode, RecordPolicy, RecordSettings, TcpInfo, MAX_RECORD_SIZE};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

/// Bounds one input's work: records decided over all its writes.
const MAX_RECORDS: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});

/// A size setting: realistic, tiny, or anything.
fn size(u: &mut Unstructured<'_>) -> Result<usize> {
    Ok(match u.int_in_range(0..=2)? {
        0 => u.int_in_range(0..=20_000)?,
        1 => u.int_in_range(0..=3)?,
        _ => u.arbitrary()?,
    })
}

fn duration(u: &mut Unstructured<'_>) -> Result<Duration> {
    Ok(match u.int_in_range(0..=3)? {
        0 => Duration::ZERO,
        1 => Duration::from_micros(u.int_in_range(0..=5_000_000)?),
        2 => Duration::from_secs(u.arbitrary()?),
        _ => Duration::new(u.arbitrary()?, u.int_in_range(0..=999_999_999)?),
    })
}

fn tcp_info(u: &mut Unstructured<'_>) -> Result<TcpInfo> {
    let small = u.arbitrary::<bool>()?;
    let mut field = |max: u32| -> Result<u32> {
        if small {
            u.int_in_range(0..=max)
        } else {
            u.arbitrary()
        }
    };
    Ok(TcpInfo {
        rtt_us: field(1_000_000)?,
        rttvar_us: field(500_000)?,
        snd_cwnd: field(200)?,
        snd_mss: field(65_483)?,
        unacked: field(200)?,
        total_retrans: field(10)?,
        snd_ssthresh: field(u32::MAX)?,
        // The record policies do not read it (`$tcpinfo_rcv_space` does).
        rcv_space: 0,
    })
}

fn run(u: &mut Unstructured<'_>) -> Result<()> {
    let settings = RecordSettings {
        ssl_buffer_size: size(u)?,
        ssl_dyn_rec_enable: *u.choose(&[DynRecMode::Off, DynRecMode::On, DynRecMode::Adaptive])?,
        ssl_dyn_rec_size_lo: size(u)?,
        ssl_dyn_rec_size_hi: size(u)?,
        ssl_dyn_rec_threshold: u.arbitrary()?,
        ssl_dyn_rec_timeout: duration(u)?,
    };
    let full = settings.full_size();
    assert!((1..=MAX_RECORD_SIZE).contains(&full));
    let clamp = |n: usize| n.clamp(1, MAX_RECORD_SIZE).min(full);
    let dynamic_sizes = [
        clamp(settings.ssl_dyn_rec_size_lo),
        clamp(settings.ssl_dyn_rec_size_hi),
        full,
    ];
    let mut policy = settings.policy();
    let _ = policy.name();
    if u.arbitrary::<bool>()? {
        policy.set_record_overhead(size(u)?);
    }

    let mut now = Instant::now();
    let mut tcp = tcp_info(u)?;
    let mut records = 0;
    while records < MAX_RECORDS && !u.is_empty() {
        // The clock between writes: forwards (possibly past what an Instant can hold, then it
        // stays put), or now and then backwards.
        let step = duration(u)?;
        now = if u.ratio(1, 16)? {
            now.checked_sub(step).unwrap_or(now)
        } else {
            now.checked_add(step).unwrap_or(now)
        };
        if u.arbitrary::<bool>()? {
            tcp = tcp_info(u)?;
        }
        let mut pending = match u.int_in_range(0..=2)? {
            0 => u.int_in_range(1..=2_000)?,
            1 => u.int_in_range(1..=200_000)?,
            _ => u.arbitrary::<u32>()? as usize,
        };
        while pending > 0 && records < MAX_RECORDS {
            // The stream reads TCP_INFO only when asked (and the read may fail).
            let reading = (policy.wants_tcp_info() || u.ratio(1, 8)?) && !u.ratio(1, 16)?;
            let size = policy.next_size(now, reading.then_some(&tcp));
            assert!(
                (1..=MAX_RECORD_SIZE).contains(&size) && size <= full,
                "{settings:?}: {size}"
            );
            match &policy {
                RecordPolicy::Static(_) => assert_eq!(size, full, "{settings:?}"),
                RecordPolicy::Dynamic(_) => {
                    assert!(dynamic_sizes.contains(&size), "{settings:?}: {size}")
                }
                RecordPolicy::Adaptive(_) => {}
            }
            let written = size.min(pending);
            policy.on_record(now, written);
            pending -= written;
            records += 1;
        }
    }
    Ok(())
}
