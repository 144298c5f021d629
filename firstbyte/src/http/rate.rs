//! `limit_rate` and `limit_rate_after`: a response body paced to a rate, as nginx does it.
//!
//! nginx's write filter lets a response have sent, at time `t` after the request started,
//! `limit_rate_after + limit_rate × (t + 1 s)` bytes: the first `limit_rate_after` bytes and
//! one second's worth go at once, then the body follows at the rate. [`Pace`] is that rule as
//! plain arithmetic (bytes and times in, a budget or a wait out); [`RateBody`] applies it to
//! any body, cutting frames to the budget and sleeping while there is none. A rate-limited
//! file body is read (not `sendfile`d), so that frames can be cut.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use tokio::time::Instant;

/// The pacing rule of one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// Bytes per second (0: no limit).
    pub rate: u64,
    /// Bytes sent before the rate applies.
    pub after: u64,
}

/// What [`Pace::next`] allows now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allow {
    /// Up to this many bytes may go now (at least 1).
    Bytes(u64),
    /// Nothing may go before this much time has passed.
    Wait(Duration),
}

impl Pace {
    /// With `sent` bytes gone `elapsed` after the start: how many more may go now, or how
    /// long to wait.
    pub fn next(&self, sent: u64, elapsed: Duration) -> Allow {
        // 0: no limit (a rate evaluated per request may be 0).
        if self.rate == 0 {
            return Allow::Bytes(u64::MAX);
        }
        let paced = sent.saturating_sub(self.after);
        // rate × (whole seconds elapsed + 1): nginx counts in whole seconds (`ngx_time()`), so
        // a rate-limited body goes in one burst of `rate` bytes a second.
        let allowed = self
            .rate
            .saturating_mul(elapsed.as_secs().saturating_add(1));
        let before_rate = self.after.saturating_sub(sent);
        if paced < allowed {
            return Allow::Bytes(before_rate.saturating_add(allowed - paced));
        }
        // More goes once rate × (s + 1) > paced, at the start of second paced / rate.
        let due = Duration::from_secs(paced / self.rate);
        // At least a millisecond: never a busy loop.
        Allow::Wait(due.saturating_sub(elapsed).max(Duration::from_millis(1)))
    }
}

/// A body sent no faster than its [`Pace`] allows.
pub struct RateBody<B> {
    inner: B,
    pace: Pace,
    start: Instant,
    sent: u64,
    /// Bytes of a frame the budget cut, sent before anything else.
    held: Option<Bytes>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<B> RateBody<B> {
    /// Paces `inner` from now.
    pub fn new(inner: B, pace: Pace) -> Self {
        Self {
            inner,
            pace,
            start: Instant::now(),
            sent: 0,
            held: None,
            sleep: None,
        }
    }

    /// The paced body.
    pub fn get_mut(&mut self) -> &mut B {
        &mut self.inner
    }
}

impl<B> http_body::Body for RateBody<B>
where
    B: http_body::Body<Data = Bytes, Error = std::io::Error> + Unpin,
{
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        loop {
            if let Some(s) = &mut this.sleep {
                std::task::ready!(s.as_mut().poll(cx));
                this.sleep = None;
            }
            let budget = match this.pace.next(this.sent, this.start.elapsed()) {
                Allow::Bytes(n) => n,
                Allow::Wait(d) => {
                    this.sleep = Some(Box::pin(tokio::time::sleep(d)));
                    continue;
                }
            };
            let mut data = match this.held.take() {
                Some(d) => d,
                None => match std::task::ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                    Some(Ok(f)) => match f.into_data() {
                        Ok(d) => d,
                        Err(f) => return Poll::Ready(Some(Ok(f))),
                    },
                    other => return Poll::Ready(other),
                },
            };
            if data.is_empty() {
                continue;
            }
            let n = usize::try_from(budget)
                .unwrap_or(usize::MAX)
                .min(data.len());
            if n < data.len() {
                this.held = Some(data.split_off(n));
            }
            this.sent += n as u64;
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
    }

    fn is_end_stream(&self) -> bool {
        self.held.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let held = self.held.as_ref().map_or(0, |h| h.len() as u64);
        let inner = self.inner.size_hint();
        let mut h = SizeHint::new();
        h.set_lower(inner.lower() + held);
        if let Some(u) = inner.upper() {
            h.set_upper(u + held);
        }
        h
    }
}

/// A body whose rate is known only once the response head is in the request's variables
/// (`proxy_limit_rate $upstream_http_x_rate`): nothing is read before [`RateLater::set`]
/// gives the rate, paced from then; a rate never given (the response was dropped or
/// replaced) or 0 is no limit.
pub struct LaterRateBody<B> {
    rate: Option<tokio::sync::oneshot::Receiver<u64>>,
    body: RateBody<B>,
}

/// The other end of a [`LaterRateBody`], carried as a response extension to where the
/// request's variables can be evaluated.
#[derive(Clone)]
pub struct RateLater(std::sync::Arc<std::sync::Mutex<Option<tokio::sync::oneshot::Sender<u64>>>>);

impl RateLater {
    /// `inner`, to be paced at the rate given later.
    pub fn pair<B>(inner: B) -> (LaterRateBody<B>, RateLater) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let body = LaterRateBody {
            rate: Some(rx),
            body: RateBody::new(inner, Pace { rate: 0, after: 0 }),
        };
        let later = RateLater(std::sync::Arc::new(std::sync::Mutex::new(Some(tx))));
        (body, later)
    }

    /// The body's rate (bytes per second, 0: no limit).
    pub fn set(&self, rate: u64) {
        let tx = self.0.lock().ok().and_then(|mut t| t.take());
        if let Some(tx) = tx {
            let _ = tx.send(rate);
        }
    }
}

impl<B> LaterRateBody<B> {
    /// The paced body.
    pub fn get_mut(&mut self) -> &mut B {
        self.body.get_mut()
    }
}

impl<B> http_body::Body for LaterRateBody<B>
where
    B: http_body::Body<Data = Bytes, Error = std::io::Error> + Unpin,
{
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        if let Some(rx) = &mut this.rate {
            let rate = std::task::ready!(Pin::new(rx).poll(cx)).unwrap_or(0);
            this.rate = None;
            this.body.pace.rate = rate;
            this.body.start = Instant::now();
        }
        Pin::new(&mut this.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn one_second_of_rate_goes_at_once_then_the_rate() {
        let p = Pace {
            rate: 1000,
            after: 0,
        };
        assert_eq!(p.next(0, Duration::ZERO), Allow::Bytes(1000));
        assert_eq!(p.next(600, Duration::ZERO), Allow::Bytes(400));
        // 1000 sent at 0: the next byte is due at 1 s.
        assert_eq!(p.next(1000, Duration::ZERO), Allow::Wait(S));
        assert_eq!(
            p.next(1000, Duration::from_millis(250)),
            Allow::Wait(Duration::from_millis(750))
        );
        // From 1 s, 2000 bytes are allowed in all; the next 1000 at 2 s.
        assert_eq!(
            p.next(1000, Duration::from_millis(1500)),
            Allow::Bytes(1000)
        );
        assert_eq!(
            p.next(2000, Duration::from_millis(1500)),
            Allow::Wait(Duration::from_millis(500))
        );
        assert_eq!(p.next(2500, Duration::from_millis(2000)), Allow::Bytes(500));
    }

    #[test]
    fn limit_rate_after_goes_first_at_full_speed() {
        let p = Pace {
            rate: 100,
            after: 10_000,
        };
        assert_eq!(p.next(0, Duration::ZERO), Allow::Bytes(10_100));
        assert_eq!(p.next(9_000, Duration::ZERO), Allow::Bytes(1_100));
        assert_eq!(p.next(10_100, Duration::ZERO), Allow::Wait(S));
        // 10 s later: 1 100 more than `after` may have gone.
        assert_eq!(p.next(10_100, 10 * S), Allow::Bytes(1_000));
        assert_eq!(p.next(11_100, 10 * S), Allow::Wait(S));
    }

    #[test]
    fn huge_values_do_not_overflow() {
        let p = Pace {
            rate: u64::MAX,
            after: u64::MAX,
        };
        assert!(matches!(p.next(u64::MAX, 1000 * S), Allow::Bytes(_)));
        let p = Pace { rate: 1, after: 0 };
        assert!(matches!(p.next(u64::MAX, Duration::ZERO), Allow::Wait(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_is_cut_to_the_budget_and_paced() {
        use http_body_util::BodyExt;
        let body = crate::http::body::Body::full(vec![7u8; 3500]);
        let mut b = RateBody::new(
            body,
            Pace {
                rate: 1000,
                after: 0,
            },
        );
        let t0 = Instant::now();
        let mut got = Vec::new();
        while let Some(f) = b.frame().await {
            let d = f.expect("frame").into_data().expect("data");
            got.push((d.len(), t0.elapsed().as_millis()));
        }
        // 1000 at once, then 1000 a second: 1000 @ 0, 1000 @ 1 s, 1000 @ 2 s, 500 @ 3 s.
        assert_eq!(
            got,
            vec![(1000, 0), (1000, 1000), (1000, 2000), (500, 3000)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_later_rate_waits_for_its_rate_and_none_is_no_limit() {
        use http_body_util::BodyExt;
        let (mut b, later) = RateLater::pair(crate::http::body::Body::full(vec![7u8; 2500]));
        // Nothing is read before the rate comes.
        let first = tokio::time::timeout(Duration::from_secs(5), b.frame()).await;
        assert!(first.is_err(), "read before its rate");
        later.set(1000);
        let t0 = Instant::now();
        let mut got = Vec::new();
        while let Some(f) = b.frame().await {
            let d = f.expect("frame").into_data().expect("data");
            got.push((d.len(), t0.elapsed().as_millis()));
        }
        assert_eq!(got, vec![(1000, 0), (1000, 1000), (500, 2000)]);
        // Its sender dropped: no limit.
        let (mut b, later) = RateLater::pair(crate::http::body::Body::full(vec![7u8; 2500]));
        drop(later);
        let t0 = Instant::now();
        let d = b
            .frame()
            .await
            .expect("frame")
            .expect("ok")
            .into_data()
            .expect("data");
        assert_eq!((d.len(), t0.elapsed().as_millis()), (2500, 0));
    }
}
