//! One keep-alive HTTP/1.1 connection driven in a closed or an open loop.
//!
//! Closed loop: send, wait for the whole response, send again. Latency is measured from
//! the send. Open loop: requests follow a fixed schedule (one every
//! `connections / rate` seconds on each connection) and latency is measured from the
//! *intended* send time, so a stall that delays later sends shows up in their latency
//! instead of vanishing (coordinated omission, corrected the way wrk2 does it).
//!
//! A connection that fails (transport error, timeout) is dropped and reopened before the
//! next request. The connection's I/O runs in the same task as its requests. Each
//! connection writes to its thread's [`Recorder`] through a `RefCell`: all connections
//! of a thread run on one single-threaded runtime.
//!
//! *What* a connection sends is its [`Traffic`]: [`OneRequest`], the one-query form's
//! prepared request (a header-map clone and a reference-count bump per send), or a
//! workload connection ([`crate::workload::traffic`]) that draws an operation, renders
//! it, and checks the answer. The loops here only time, send and record.

use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use hyper::Request;

use crate::bench::outcome::{classify, Outcome};
use crate::bench::recorder::Recorder;
use crate::bench::request_template::RequestTemplate;

/// Pause after a failed connect in a closed loop, so a dead target is not hammered in a
/// tight loop that would burn the load generator's CPU.
const RECONNECT_PAUSE: Duration = Duration::from_millis(10);

/// What one connection sends, and how it judges each answer.
pub trait Traffic {
    /// What `next` hands on to `finish` about the request in flight.
    type Ticket;

    /// Where the connection goes.
    fn addr(&self) -> SocketAddr;

    /// The next request. It may wait (a workload's write waits for the write in flight
    /// on the same entity); the latency clock starts after it.
    fn next(
        &mut self,
        control: &Control,
    ) -> impl Future<Output = (Request<Full<Bytes>>, Self::Ticket)>;

    /// Classify what came back (`Ok((status, body))`, the body kept for 2xx only, or the
    /// transport outcome) and record what it shows. `in_window`: whether the request
    /// counts in the measured window.
    fn finish(
        &mut self,
        ticket: Self::Ticket,
        answer: Result<(u16, &[u8]), Outcome>,
        sent: Instant,
        done: Instant,
        in_window: bool,
    ) -> Outcome;
}

/// The one-query form: the same prepared request every time (or numbered, with
/// `--unique-literals`), classified by status and GraphQL errors.
pub struct OneRequest<'a> {
    pub template: &'a RequestTemplate,
}

impl Traffic for OneRequest<'_> {
    type Ticket = ();

    fn addr(&self) -> SocketAddr {
        self.template.addr
    }

    fn next(&mut self, control: &Control) -> impl Future<Output = (Request<Full<Bytes>>, ())> {
        let request = if self.template.numbered.is_some() {
            self.template
                .build_numbered(control.sequence.fetch_add(1, Ordering::Relaxed))
        } else {
            self.template.build()
        };
        std::future::ready((request, ()))
    }

    fn finish(
        &mut self,
        _: (),
        answer: Result<(u16, &[u8]), Outcome>,
        _: Instant,
        _: Instant,
        _: bool,
    ) -> Outcome {
        match answer {
            Ok((status, body)) => classify(status, body),
            Err(outcome) => outcome,
        }
    }
}

/// The timeline and counters all connections of a run share.
#[derive(Debug)]
pub struct Control {
    /// When the run (warm-up included) began; open-loop schedules start here.
    pub start: Instant,
    /// Start of the measured window (after the warm-up).
    pub measure_start: Instant,
    /// End of the measured window; `None` when the run stops after a request count.
    pub measure_end: Option<Instant>,
    /// Closed loop with `--requests`: requests still to be claimed in the window.
    pub budget: Option<AtomicU64>,
    /// Finished requests, warm-up included (for the live progress line only).
    pub finished: AtomicU64,
    /// Finished requests that were errors, warm-up included (progress line only).
    pub failed: AtomicU64,
    /// `--unique-literals`: the next request number, shared by every connection and
    /// thread of the run so that no two requests get the same one.
    pub sequence: AtomicU64,
}

impl Control {
    /// Take one request from the `--requests` budget; false when none are left.
    fn claim(&self) -> bool {
        match &self.budget {
            None => true,
            Some(left) => left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok(),
        }
    }

    fn note_finished(&self, outcome: Outcome) {
        self.finished.fetch_add(1, Ordering::Relaxed);
        if outcome != Outcome::Ok {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

type Driver = Pin<Box<http1::Connection<TokioIo<TcpStream>, Full<Bytes>>>>;

/// An open connection, or none yet.
///
/// hyper splits a client connection into a sender and a connection future that does
/// the I/O. Instead of spawning the latter as its own task, [`drive`] polls it in the
/// same task as the request: no cross-task wake-ups or hand-offs per request.
struct Connection {
    sender: Option<SendRequest<Full<Bytes>>>,
    driver: Option<Driver>,
    /// Reused for every response body of this connection.
    body: Vec<u8>,
    /// The request timeout; see [`Connection::exchange`].
    timer: Pin<Box<tokio::time::Sleep>>,
}

/// Await `work` while polling the connection's I/O in the same task.
///
/// When the connection future finishes (the peer closed it, or it failed) it is
/// dropped, and `work` sees the closed channel as an error on its next poll.
async fn drive<F: Future>(driver: &mut Option<Driver>, work: F) -> F::Output {
    let mut work = pin!(work);
    poll_fn(|cx| {
        // Two passes: the first lets the connection deliver what it read, and lets
        // `work` queue a request; the second writes that request at once.
        for _ in 0..2 {
            if let Some(d) = driver.as_mut() {
                if d.as_mut().poll(cx).is_ready() {
                    *driver = None;
                }
            }
            if let Poll::Ready(out) = work.as_mut().poll(cx) {
                return Poll::Ready(out);
            }
        }
        Poll::Pending
    })
    .await
}

impl Connection {
    /// A connection slot; must be called inside the runtime (it creates a timer).
    fn new() -> Connection {
        Connection {
            sender: None,
            driver: None,
            body: Vec::with_capacity(4096),
            timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
        }
    }

    fn close(&mut self) {
        self.sender = None;
        self.driver = None;
    }

    /// A sender ready for the next request, connecting first if needed.
    async fn ready(&mut self, addr: SocketAddr, timeout: Duration) -> Result<(), Outcome> {
        if let Some(sender) = &mut self.sender {
            // An idle connection the server has closed is not an error: reconnect.
            if drive(&mut self.driver, sender.ready()).await.is_ok() {
                return Ok(());
            }
            self.close();
        }
        let stream = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
            Err(_) => return Err(Outcome::Timeout),
            Ok(Err(_)) => return Err(Outcome::Transport),
            Ok(Ok(stream)) => stream,
        };
        // Small requests must leave at once, as every load generator does.
        let _ = stream.set_nodelay(true);
        let (sender, driver) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|_| Outcome::Transport)?;
        self.sender = Some(sender);
        self.driver = Some(Box::pin(driver));
        Ok(())
    }

    /// Send one request and read the whole response: its status and body size (the
    /// body itself, for 2xx, is in `self.body`), or why there is none.
    async fn exchange(
        &mut self,
        request: Request<Full<Bytes>>,
        timeout: Duration,
    ) -> Result<(u16, usize), Outcome> {
        let Connection {
            sender,
            driver,
            body,
            timer,
        } = self;
        let Some(sender) = sender else {
            return Err(Outcome::Transport);
        };
        let deadline = tokio::time::Instant::now() + timeout;
        if timer.is_elapsed() {
            timer.as_mut().reset(deadline);
        }
        let work = async {
            let response = sender.send_request(request).await?;
            let status = response.status().as_u16();
            let keep_body = (200..300).contains(&status);
            body.clear();
            let mut size = 0usize;
            let mut incoming = response.into_body();
            while let Some(frame) = incoming.frame().await {
                if let Ok(data) = frame?.into_data() {
                    size += data.len();
                    if keep_body {
                        body.extend_from_slice(&data);
                    }
                }
            }
            Ok::<_, hyper::Error>((status, size))
        };
        // The timer is re-armed lazily: it stays armed at an earlier request's deadline,
        // which always comes first; when it fires early it moves to this request's
        // deadline. So a timer-wheel update happens about once per `timeout` per
        // connection instead of once per request, and a timeout still fires on time.
        let result = {
            let mut work = pin!(drive(driver, work));
            poll_fn(|cx| {
                if let Poll::Ready(out) = work.as_mut().poll(cx) {
                    return Poll::Ready(Some(out));
                }
                while timer.as_mut().poll(cx).is_ready() {
                    if tokio::time::Instant::now() >= deadline {
                        return Poll::Ready(None);
                    }
                    timer.as_mut().reset(deadline);
                }
                Poll::Pending
            })
            .await
        };
        match result {
            Some(Ok((status, size))) => Ok((status, size)),
            Some(Err(_)) => {
                self.close();
                Err(Outcome::Transport)
            }
            None => {
                // The connection may still carry the late response: never reuse it.
                self.close();
                Err(Outcome::Timeout)
            }
        }
    }

    /// Draw the next request from `traffic`, send it, and let `traffic` judge the
    /// answer. Returns the outcome, the body size, and when it was sent and answered;
    /// `in_window` decides, from the answer's time, whether the request counts.
    async fn send_next<T: Traffic>(
        &mut self,
        control: &Control,
        traffic: &mut T,
        timeout: Duration,
        on_sent: impl FnOnce(Instant),
        in_window: impl FnOnce(Instant) -> bool,
    ) -> (Outcome, usize, Instant, Instant) {
        let (request, ticket) = traffic.next(control).await;
        let sent = Instant::now();
        on_sent(sent);
        let answer = self.exchange(request, timeout).await;
        let done = Instant::now();
        let counted = in_window(done);
        let (outcome, size) = match answer {
            Ok((status, size)) => {
                let body: &[u8] = if (200..300).contains(&status) {
                    &self.body
                } else {
                    &[]
                };
                (
                    traffic.finish(ticket, Ok((status, body)), sent, done, counted),
                    size,
                )
            }
            Err(failure) => (traffic.finish(ticket, Err(failure), sent, done, counted), 0),
        };
        (outcome, size, sent, done)
    }
}

/// Drive one connection in a closed loop until the window ends or the budget is spent.
pub async fn closed_loop<T: Traffic>(
    control: &Control,
    traffic: &mut T,
    timeout: Duration,
    recorder: &RefCell<Recorder>,
) {
    let mut connection = Connection::new();
    loop {
        let now = Instant::now();
        if control.measure_end.is_some_and(|end| now >= end) {
            return;
        }
        // With --requests, only requests started in the window count against the budget.
        let counted = if control.budget.is_some() {
            if now >= control.measure_start {
                if !control.claim() {
                    return;
                }
                true
            } else {
                false
            }
        } else {
            true
        };
        let in_window = |done: Instant| match control.measure_end {
            Some(end) => done >= control.measure_start && done <= end,
            None => counted,
        };
        let (outcome, size, sent, done, connect_failed) =
            match connection.ready(traffic.addr(), timeout).await {
                Ok(()) => {
                    let (outcome, size, sent, done) = connection
                        .send_next(control, traffic, timeout, |_| {}, in_window)
                        .await;
                    (outcome, size, sent, done, false)
                }
                Err(outcome) => (outcome, 0, now, Instant::now(), true),
            };
        control.note_finished(outcome);
        if in_window(done) {
            let mut recorder = recorder.borrow_mut();
            recorder.record(outcome, done - sent, size, done);
            if outcome == Outcome::GraphQl {
                recorder.record_error_paths(&connection.body);
            }
        }
        if connect_failed {
            tokio::time::sleep(RECONNECT_PAUSE).await;
        }
    }
}

/// The send times of one open-loop connection.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    /// Intended time of this connection's first request.
    pub first: Instant,
    /// Time between two intended sends on this connection.
    pub interval: Duration,
    /// No request is scheduled at or after this time.
    pub end: Instant,
}

impl Schedule {
    /// Intended send time of request `index`.
    pub fn at(&self, index: u64) -> Instant {
        let offset = (index as f64 * self.interval.as_nanos() as f64).round();
        self.first + Duration::from_nanos(offset as u64)
    }

    /// How many intended send times fall in `[from, self.end)`.
    pub fn count_from(&self, from: Instant) -> u64 {
        let mut count = 0;
        let mut index = 0;
        // Step in closed form to the first index at or after `from`, then count.
        if from > self.first && !self.interval.is_zero() {
            index = ((from - self.first).as_nanos() as f64 / self.interval.as_nanos() as f64)
                .floor() as u64;
            while self.at(index) < from {
                index += 1;
            }
        }
        if !self.interval.is_zero() && self.at(index) < self.end {
            let span =
                (self.end - self.at(index)).as_nanos() as f64 / self.interval.as_nanos() as f64;
            count = span.ceil() as u64;
            // Settle rounding at the boundary exactly.
            while count > 0 && self.at(index + count - 1) >= self.end {
                count -= 1;
            }
            while self.at(index + count) < self.end {
                count += 1;
            }
        }
        count
    }
}

/// Drive one connection in an open loop along `schedule`.
///
/// Requests scheduled in the window but still unsent or unanswered when the caller stops
/// this future (at the drain deadline) are counted by the caller as missed.
pub async fn open_loop<T: Traffic>(
    control: &Control,
    traffic: &mut T,
    timeout: Duration,
    schedule: Schedule,
    recorder: &RefCell<Recorder>,
) {
    let mut connection = Connection::new();
    let window_end = control.measure_end.unwrap_or(schedule.end);
    let mut index = 0u64;
    loop {
        let intended = schedule.at(index);
        index += 1;
        if intended >= schedule.end {
            return;
        }
        tokio::time::sleep_until(intended.into()).await;
        let in_window = intended >= control.measure_start;
        let (outcome, size, sent, done) = match connection.ready(traffic.addr(), timeout).await {
            Ok(()) => {
                let on_sent = |sent: Instant| {
                    if sent >= control.measure_start && sent < window_end {
                        if let Some(s) = &mut recorder.borrow_mut().schedule {
                            s.sent_in_window += 1;
                        }
                    }
                };
                connection
                    .send_next(control, traffic, timeout, on_sent, |_| in_window)
                    .await
            }
            Err(outcome) => (outcome, 0, Instant::now(), Instant::now()),
        };
        control.note_finished(outcome);
        if in_window {
            let mut recorder = recorder.borrow_mut();
            recorder.record(outcome, done - intended, size, done);
            if outcome == Outcome::GraphQl {
                recorder.record_error_paths(&connection.body);
            }
            if outcome.has_response() {
                recorder.record_schedule(done - sent, sent.saturating_duration_since(intended));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_counts_match_a_walk() {
        let first = Instant::now();
        for (interval_us, end_us, from_us) in [
            (1000u64, 10_000u64, 0u64),
            (333, 10_000, 2_500),
            (1000, 10_000, 10_000),
            (700, 5_000, 4_999),
            (50, 1_000_000, 123_457),
        ] {
            let schedule = Schedule {
                first,
                interval: Duration::from_micros(interval_us),
                end: first + Duration::from_micros(end_us),
            };
            let from = first + Duration::from_micros(from_us);
            let walked = (0..)
                .map(|i| schedule.at(i))
                .take_while(|t| *t < schedule.end)
                .filter(|t| *t >= from)
                .count();
            assert_eq!(
                schedule.count_from(from),
                walked as u64,
                "{interval_us} {end_us} {from_us}"
            );
        }
    }
}
