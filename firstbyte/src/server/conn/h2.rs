//! HTTP/2 on one connection: hyper's HTTP/2 server ([`serve_h2`]) with its streams run
//! inside the connection's own task ([`StreamSet`]), a send watchdog per connection, and
//! DATA frames sized to fill TLS records ([`h2_data_chunk`]).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;

use super::shutdown::{self, Shutdown, Stop};
use crate::conf::model::ServerConf;
use crate::http::conn::Conn;
use crate::http::send_watch;
use crate::tls::stream::Turns;

/// Serves HTTP/2 on `io` to the connection's end: hyper's connection and its streams are
/// polled in this task; when [`Shutdown::until_shutdown`] says stop, GOAWAY, and the streams
/// in flight finish (an idle connection gets a second). `turns` counts the connection's polls
/// for a TLS stream in batching mode (`TlsStream::batch_flushes`).
pub(super) async fn serve_h2<I>(
    conn: Arc<Conn>,
    io: I,
    server: Arc<ServerConf>,
    turns: Turns,
    mut stop: Shutdown,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc_conn = conn.clone();
    let svc =
        hyper::service::service_fn(move |req| crate::http::pipeline::serve(svc_conn.clone(), req));
    // Streams run inside this task (no spawn, no cross-task wake per request).
    let streams = StreamSet::default();
    let mut b = hyper::server::conn::http2::Builder::new(streams.clone());
    b.timer(TokioTimer::new());
    crate::http::h2limits::apply_h2_limits!(b, &server);
    let c = b.serve_connection(TokioIo::new(io), svc);
    // Boxed: only the protocol in use is allocated, and the task stays small.
    let mut c = Box::pin(c);
    let stopped = tokio::select! {
        _ = turns.count(streams.drive(&mut c)) => return,
        never = streams.watch_sends(conn.facts.peer) => match never {},
        why = stop.until_shutdown(&conn) => why,
    };
    c.as_mut().graceful_shutdown();
    // Draining still bounds stalled streams.
    let drain = async {
        tokio::select! {
            _ = turns.count(streams.drive(c)) => {}
            never = streams.watch_sends(conn.facts.peer) => match never {},
        }
    };
    shutdown::finish_graceful(drain, stopped == Stop::Idle).await;
}

/// A future run by [`StreamSet`].
type StreamFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// hyper's executor for one HTTP/2 connection: instead of a tokio task per stream (a spawn,
/// a task allocation, a future copy and a cross-task wake per request), the stream futures
/// live in the connection's own task and are polled by [`StreamSet::drive`] right after the
/// connection, only when woken. Responses produced in one turn are then written in the
/// next together (see `tls::stream::TlsStream::batch_flushes`).
#[derive(Clone, Default)]
pub struct StreamSet(Arc<SetShared>);

/// One place in a [`StreamSet`].
enum Slot {
    Free,
    /// Taken out for a poll (the lock is not held while a stream runs: a stream may start
    /// another, e.g. an upgraded CONNECT stream).
    Running,
    /// A future with its waker (made once per stream, not per poll).
    Parked(StreamFuture, Arc<SlotWaker>, Waker),
}

#[derive(Default)]
struct SetShared {
    slots: Mutex<Vec<Slot>>,
    /// Slots woken since the last drive (a slot may appear twice; polling is idempotent).
    ready: Mutex<Vec<usize>>,
    /// The connection task's waker.
    task: Mutex<Option<Waker>>,
    /// Signalled when a stream starts (the send watchdog sleeps while there is none).
    started: Notify,
}

/// Wakes one slot: queues it and wakes the connection task.
struct SlotWaker {
    set: Arc<SetShared>,
    slot: usize,
    queued: AtomicBool,
    /// The stream's response progress, for `send_timeout` (see `send_watch`).
    progress: Arc<send_watch::Progress>,
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            lock(&self.set.ready).push(self.slot);
        }
        if let Some(w) = lock(&self.set.task).as_ref() {
            w.wake_by_ref();
        }
    }
}

/// A poisoned lock (a panic while it was held) still holds consistent data here: every
/// change under it is one push, take or assignment.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<F> hyper::rt::Executor<F> for StreamSet
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, fut: F) {
        let mut slots = lock(&self.0.slots);
        let slot = slots
            .iter()
            .position(|s| matches!(s, Slot::Free))
            .unwrap_or_else(|| {
                slots.push(Slot::Free);
                slots.len() - 1
            });
        let flag = Arc::new(SlotWaker {
            set: self.0.clone(),
            slot,
            queued: AtomicBool::new(true),
            progress: Arc::default(),
        });
        let waker = Waker::from(flag.clone());
        slots[slot] = Slot::Parked(Box::pin(fut), flag, waker);
        drop(slots);
        lock(&self.0.ready).push(slot);
        if let Some(w) = lock(&self.0.task).as_ref() {
            w.wake_by_ref();
        }
        self.0.started.notify_one();
    }
}

impl StreamSet {
    /// `conn`, with the set's streams polled after it on every poll.
    pub fn drive<F: Future + Unpin>(&self, conn: F) -> Driven<'_, F> {
        Driven { set: self, conn }
    }

    /// Futures in the set.
    pub fn len(&self) -> usize {
        lock(&self.0.slots)
            .iter()
            .filter(|s| !matches!(s, Slot::Free))
            .count()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Polls every woken stream once; whether any was polled.
    fn run_ready(&self, cx: &Context<'_>) -> bool {
        {
            let mut task = lock(&self.0.task);
            if !task.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *task = Some(cx.waker().clone());
            }
        }
        let ready = std::mem::take(&mut *lock(&self.0.ready));
        if ready.is_empty() {
            return false;
        }
        for slot in ready {
            let (mut fut, flag, waker) = {
                let mut slots = lock(&self.0.slots);
                let Some(place) = slots.get_mut(slot) else {
                    continue;
                };
                match std::mem::replace(place, Slot::Running) {
                    Slot::Parked(f, flag, waker) => (f, flag, waker),
                    other => {
                        *place = other;
                        continue;
                    }
                }
            };
            // Cleared before the poll: a wake during or after it queues the slot again.
            flag.queued.store(false, Ordering::Release);
            let done = send_watch::enter(&flag.progress, || {
                fut.as_mut()
                    .poll(&mut Context::from_waker(&waker))
                    .is_ready()
            });
            lock(&self.0.slots)[slot] = if done {
                Slot::Free
            } else {
                Slot::Parked(fut, flag, waker)
            };
        }
        true
    }
}

impl StreamSet {
    /// Drops the streams whose response has waited on the client for its whole
    /// `send_timeout` (h2 then resets them); returns how many, and the earliest deadline of
    /// the others.
    fn drop_stalled(&self, now: u64) -> (usize, Option<u64>) {
        let mut dropped = Vec::new();
        let mut next: Option<u64> = None;
        {
            let mut slots = lock(&self.0.slots);
            for place in slots.iter_mut() {
                let Slot::Parked(_, flag, _) = place else {
                    continue;
                };
                if flag.progress.stalled_at(now) {
                    dropped.push(std::mem::replace(place, Slot::Free));
                } else if let Some(d) = flag.progress.deadline() {
                    next = Some(next.map_or(d, |n| n.min(d)));
                }
            }
        }
        // Dropped outside the lock: a stream's drop may wake others.
        let n = dropped.len();
        drop(dropped);
        (n, next)
    }

    /// The send watchdog of one HTTP/2 connection: sleeps while no stream exists, else until
    /// the earliest deadline (at most a second later: deadlines move as streams progress),
    /// and drops stalled streams. Never returns.
    pub async fn watch_sends(&self, peer: Option<SocketAddr>) -> Infallible {
        loop {
            if self.is_empty() {
                self.0.started.notified().await;
                continue;
            }
            let now = send_watch::now_ms();
            let (dropped, next) = self.drop_stalled(now);
            if dropped > 0 {
                crate::fblog!(
                    Info,
                    "client timed out (110: Connection timed out) while sending response to client, client: {}, streams reset: {dropped}",
                    peer.map(|p| p.ip().to_string()).unwrap_or_default()
                );
                // The connection polls again: h2 sends the resets.
                if let Some(w) = lock(&self.0.task).as_ref() {
                    w.wake_by_ref();
                }
            }
            let wait = next.map_or(1000, |d| d.saturating_sub(now).clamp(10, 1000));
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
    }
}

/// A connection future driven together with its [`StreamSet`].
pub struct Driven<'a, F> {
    set: &'a StreamSet,
    conn: F,
}

impl<F: Future + Unpin> Future for Driven<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        if let Poll::Ready(out) = Pin::new(&mut this.conn).poll(cx) {
            return Poll::Ready(out);
        }
        // Streams opened or woken: run them, then let the connection take their frames in
        // this same turn.
        if this.set.run_ready(cx) {
            return Pin::new(&mut this.conn).poll(cx);
        }
        Poll::Pending
    }
}

/// Bytes of an HTTP/2 frame header (RFC 9113 §4.1).
const H2_FRAME_HEADER: usize = 9;

/// Records smaller than this are not worth fitting DATA frames into: a frame then spans
/// several records, and frames stay the default size (1 KB = a few frame headers' worth).
const MIN_FITTED_RECORD: usize = 1024;

/// HTTP/2 DATA payload per frame so that frame header + payload fill one record of
/// `record` bytes; `None` (the default chunk) when records are smaller than
/// [`MIN_FITTED_RECORD`] — any `ssl_buffer_size` nginx accepts works, down to 1 byte.
pub(super) fn h2_data_chunk(record: usize) -> Option<usize> {
    (record >= MIN_FITTED_RECORD).then(|| record - H2_FRAME_HEADER)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// Streams run inside the driving task: each is polled when woken, finished ones free
    /// their slot, and a stream may start another while it runs.
    #[tokio::test]
    async fn stream_set_runs_streams_in_the_driving_task() {
        let set = StreamSet::default();
        let done = Arc::new(AtomicU64::new(0));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let d = done.clone();
        hyper::rt::Executor::execute(&set, async move {
            let _ = rx.await;
            d.fetch_add(1, Ordering::Relaxed);
        });
        let (d, inner_set) = (done.clone(), set.clone());
        hyper::rt::Executor::execute(&set, async move {
            let d2 = d.clone();
            hyper::rt::Executor::execute(&inner_set, async move {
                d2.fetch_add(10, Ordering::Relaxed);
            });
            d.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(set.len(), 2);
        let mut conn = Box::pin(std::future::pending::<()>());
        let r = tokio::time::timeout(Duration::from_millis(20), set.drive(&mut conn)).await;
        assert!(r.is_err(), "the connection is still pending");
        assert_eq!(
            done.load(Ordering::Relaxed),
            11,
            "second stream and its child ran"
        );
        assert_eq!(set.len(), 1, "only the waiting stream is left");
        tx.send(()).unwrap();
        let _ = tokio::time::timeout(Duration::from_millis(20), set.drive(&mut conn)).await;
        assert_eq!(done.load(Ordering::Relaxed), 12, "woken stream finished");
        assert!(set.is_empty());
        let mut finished = Box::pin(async { 7 });
        assert_eq!(set.drive(&mut finished).await, 7);
    }

    #[test]
    fn data_frames_fit_records_only_when_records_are_big_enough() {
        assert_eq!(h2_data_chunk(16384), Some(16375));
        assert_eq!(h2_data_chunk(1024), Some(1015));
        for tiny in [1, 8, 9, 10, 1023] {
            assert_eq!(h2_data_chunk(tiny), None, "{tiny}");
        }
    }
}
