//! What a client sends to the access-control code: the PROXY protocol header (v1 text, v2
//! binary), `Authorization: Basic` and htpasswd lines, X-Forwarded-For lists, and the
//! leaky bucket's arithmetic with arbitrary times and rates. Besides never panicking:
//! - a complete PROXY header is no longer than the input and 4096 bytes, and the same bytes
//!   alone parse to the same header;
//! - credentials have a non-empty user without a colon;
//! - a user's stored hash has no `:`, CR or LF;
//! - the real address is one written in the list, and only a trusted peer gets one;
//! - the bucket never delays longer than its burst allows and rejects only over the burst.

#![no_main]

use firstbyte::fuzzing::{
    auth_credentials, auth_find_user, leaky_bucket, proxy_protocol_parse, Bucket, ProxyParsed,
    Rate, RealIp, RealIpHeader, Trusted, Verdict,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, data)) = data.split_first() else {
        return;
    };
    match selector % 4 {
        0 => {
            if let ProxyParsed::Done(n, addrs) = proxy_protocol_parse(data) {
                assert!(n <= data.len() && n <= 4096);
                assert_eq!(
                    proxy_protocol_parse(&data[..n]),
                    ProxyParsed::Done(n, addrs)
                );
            }
        }
        1 => {
            if let Some((user, _)) = auth_credentials(data) {
                assert!(!user.is_empty() && !user.contains(&b':'));
            }
            let (user, file) = data.split_at(data.len().min(8));
            if let Some(hash) = auth_find_user(file, user) {
                assert!(!hash.iter().any(|b| matches!(b, b':' | b'\r' | b'\n')));
            }
        }
        2 => {
            let Ok(text) = std::str::from_utf8(data) else {
                return;
            };
            let r = RealIp {
                from: vec![
                    Trusted::Cidr("127.0.0.1".parse().unwrap(), 32),
                    Trusted::Cidr("10.0.0.0".parse().unwrap(), 8),
                ],
                header: RealIpHeader::XForwardedFor,
                recursive: text.len() % 2 == 0,
            };
            if let Some(a) = r.resolve(Some("127.0.0.1".parse().unwrap()), Some(text), None) {
                let ip = a.ip().to_string();
                assert!(
                    text.to_ascii_lowercase().contains(&ip)
                        || text.contains('[')
                        || text.contains(':')
                );
            }
            assert_eq!(
                r.resolve(Some("192.0.2.1".parse().unwrap()), Some(text), None),
                None
            );
        }
        _ => {
            if data.len() < 40 {
                return;
            }
            let n = |i: usize| u64::from_le_bytes(data[i..i + 8].try_into().unwrap());
            let rate = Rate {
                rate: n(0).max(1),
                burst: n(8),
                delay: n(16),
            };
            let state = (n(24) % 2 == 0).then(|| Bucket {
                excess: n(24),
                last: n(32),
            });
            let (v, excess, _) = leaky_bucket(n(32) ^ n(0), state, rate);
            match v {
                Verdict::Reject => assert!(excess > rate.burst),
                Verdict::Delay(_) => assert!(excess > rate.delay && excess <= rate.burst),
                Verdict::Pass => assert!(excess <= rate.burst),
            }
        }
    }
});
