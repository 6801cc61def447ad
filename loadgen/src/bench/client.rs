//! One keep-alive HTTP/1.1 connection driven in a closed or an open loop.
//!
//! Closed loop: send, wait for the whole response, send again. Latency is measured from
//! the send. Open loop: requests follow a fixed schedule (one every
//! `connections / rate` seconds on each connection) and latency is measured from the
//! *intended* send time, so a stall that delays later sends shows up in their latency
//! instead of vanishing (coordinated omission, corrected the way wrk2 does it).
//!
//! A connection that fails (transport error, timeout) is dropped and reopened before the
//! next request. The connection is [`http1_wire`]'s lean HTTP/1.1 client, and its I/O
//! runs in the same task as its requests; answers are read in place into buffers the
//! thread's connections share, and judged there (a 98.5 KB deep answer is neither
//! copied nor grown into). Each
//! connection writes to its thread's [`Recorder`] through a `RefCell`: all connections
//! of a thread run on one single-threaded runtime.
//!
//! *What* a connection sends is its [`Traffic`]: [`OneRequest`], the one-query form's
//! prepared request (two reference-count bumps per send), or a
//! workload connection ([`crate::workload::traffic`]) that draws an operation, renders
//! it, and checks the answer. The loops here only time, send and record.

use std::cell::RefCell;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http1_wire::{AnswerRules, Buffers, ExchangeError};

use crate::bench::outcome::{classify, Outcome};
use crate::bench::recorder::Recorder;
use crate::bench::request_template::{RequestTemplate, WireRequest};

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
    fn next(&mut self, control: &Control) -> impl Future<Output = (WireRequest, Self::Ticket)>;

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

    fn next(&mut self, control: &Control) -> impl Future<Output = (WireRequest, ())> {
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

/// Largest answer body a benchmark accepts; a larger one is a transport error.
const MAX_BODY: usize = 1 << 30;
/// A connection idle this long is checked for a close before it is used again.
const CHECK_IDLE_AFTER: Duration = Duration::from_millis(20);

/// An open connection, or none yet.
///
/// The connection is [`http1_wire`]'s: the request goes out as prepared bytes in one
/// vectored write and the answer is read in place, in the connection's own task, with
/// no header map, channel or hand-off per request. The body is judged where it is,
/// never copied, in a buffer the connection holds from when the answer begins to
/// arrive until [`Connection::release`]: one of the thread's `buffers`, the one given
/// back last, still in cache.
struct Connection<'a> {
    buffers: &'a Buffers,
    open: Option<http1_wire::Connection>,
    /// The last answer said the connection may carry no other: it is closed before the
    /// next request, not at once, as its body is read from the connection's buffer.
    spent: bool,
    /// Whether the last answer was 2xx (then [`Connection::body`] is its body).
    kept: bool,
}

impl<'a> Connection<'a> {
    fn new(buffers: &'a Buffers) -> Connection<'a> {
        Connection {
            buffers,
            open: None,
            spent: false,
            kept: false,
        }
    }

    fn close(&mut self) {
        self.release();
        self.open = None;
        self.spent = false;
    }

    /// Done with the last answer's body: its buffer goes back to the thread's.
    fn release(&mut self) {
        if let Some(connection) = &mut self.open {
            connection.release(self.buffers);
        }
        self.kept = false;
    }

    /// The body of the last answer if it was 2xx, else empty.
    fn body(&self) -> &[u8] {
        match &self.open {
            Some(connection) if self.kept => connection.body(),
            _ => &[],
        }
    }

    /// An open connection, connecting first if needed.
    ///
    /// A connection that sat idle for [`CHECK_IDLE_AFTER`] is first checked for a close
    /// the server sent meanwhile (one non-blocking read): a server may close an idle
    /// keep-alive connection, and that is not an error, as hyper's client does not
    /// count it either. Under load no connection idles that long, so the check costs
    /// nothing there; a request the server drops *after* it was sent is an error.
    /// `now`: the caller's clock reading, close enough to now (saves a clock read).
    async fn ready(
        &mut self,
        addr: SocketAddr,
        timeout: Duration,
        now: Instant,
    ) -> Result<(), Outcome> {
        if self.spent {
            self.close();
        }
        if let Some(connection) = &self.open {
            let idle = connection.idle_for(now.into());
            if idle < CHECK_IDLE_AFTER || !connection.closed_while_idle() {
                return Ok(());
            }
            self.close();
        }
        match tokio::time::timeout(timeout, http1_wire::Connection::open(addr)).await {
            Err(_) => Err(Outcome::Timeout),
            Ok(Err(_)) => Err(Outcome::Transport),
            Ok(Ok(connection)) => {
                self.open = Some(connection);
                Ok(())
            }
        }
    }

    /// Send one request (at `sent`) and read the whole response: its status and body
    /// size (the body itself, for 2xx, is [`Connection::body`]), or why there is none.
    async fn exchange(
        &mut self,
        request: &WireRequest,
        sent: Instant,
        timeout: Duration,
    ) -> Result<(u16, usize), Outcome> {
        self.kept = false;
        let Some(connection) = self.open.as_mut() else {
            return Err(Outcome::Transport);
        };
        let sent = tokio::time::Instant::from_std(sent);
        let deadline = sent + timeout;
        let rules = AnswerRules {
            max_body: MAX_BODY,
            head_request: request.head_request,
        };
        let parts: [&[u8]; 2] = [&request.head, &request.body];
        match connection
            .exchange_in_place(&parts, deadline, rules, self.buffers, |_, _| {})
            .await
        {
            Ok(answer) => {
                if answer.reusable {
                    // Counted from the send, which saves a clock read: a connection
                    // whose answers take over CHECK_IDLE_AFTER is checked before each
                    // reuse, one non-blocking read for a request that slow.
                    connection.set_idle(sent);
                } else {
                    self.spent = true;
                }
                let size = connection.body().len();
                self.kept = (200..300).contains(&answer.status);
                Ok((answer.status, size))
            }
            Err(ExchangeError::Timeout) => {
                // The connection may still carry the late response: never reuse it.
                self.close();
                Err(Outcome::Timeout)
            }
            Err(_) => {
                self.close();
                Err(Outcome::Transport)
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
        let answer = self.exchange(&request, sent, timeout).await;
        let done = Instant::now();
        let counted = in_window(done);
        let (outcome, size) = match answer {
            Ok((status, size)) => (
                traffic.finish(ticket, Ok((status, self.body())), sent, done, counted),
                size,
            ),
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
    buffers: &Buffers,
) {
    let mut connection = Connection::new(buffers);
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
            match connection.ready(traffic.addr(), timeout, now).await {
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
                recorder.record_error_paths(connection.body());
            }
        }
        connection.release();
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
    buffers: &Buffers,
) {
    let mut connection = Connection::new(buffers);
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
        let ready = connection.ready(traffic.addr(), timeout, intended).await;
        let (outcome, size, sent, done) = match ready {
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
                recorder.record_error_paths(connection.body());
            }
            if outcome.has_response() {
                recorder.record_schedule(done - sent, sent.saturating_duration_since(intended));
            }
        }
        connection.release();
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
