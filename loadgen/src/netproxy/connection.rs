//! One proxied connection: a thread that moves both directions through their delay
//! lines.
//!
//! Each direction is a `Lane`: what was read from its source socket waits in a queue,
//! stamped with its release time, until the loop writes it to the other socket. The
//! loop sleeps in `ppoll` on both sockets until data arrives, a blocked socket drains,
//! or the next release is close; it then spins the rest of the way (checking the
//! sockets without sleeping), so a chunk leaves within a few µs of its release time.
//! How early it wakes (`EarlyWake`) follows how late `ppoll` has been waking this
//! thread, so the spin is short (a few µs to a few tens) and the thread costs no CPU
//! between chunks.
//!
//! - **Backpressure:** a lane stops reading its source once [`MAX_QUEUED`] bytes wait in
//!   it; the sender's TCP window then fills, as on a slow link. A destination that will
//!   not take more is waited for with `POLLOUT`.
//! - **Half-close:** EOF from a source is queued like data; when it is released, after
//!   everything before it, the destination's writing side is shut down (a FIN). The
//!   other direction goes on until its own EOF.
//! - **Resets:** a read error (a RST) is queued too, and released as an abortive close
//!   of the destination (`SO_LINGER` 0: a RST after the delayed data). A destination
//!   that refuses a write ends that lane; the connection's sockets are closed when
//!   both lanes are done.

use std::collections::VecDeque;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::delay::{DelayLine, DelayModel, Direction};
use super::socket::{self, Read};

/// The least and the most the loop wakes before a release time.
const MIN_EARLY: Duration = Duration::from_micros(5);
const MAX_EARLY: Duration = Duration::from_micros(200);
/// Added to the mean lateness of `ppoll`'s wake-ups to choose how early to wake.
const EARLY_MARGIN: Duration = Duration::from_micros(10);
/// Bytes one read takes at most.
const READ_SIZE: usize = 64 * 1024;
/// Bytes a direction holds before it stops reading its source.
pub const MAX_QUEUED: usize = 4 << 20;

/// What the proxy counts over its lifetime.
#[derive(Default)]
pub struct Counters {
    pub connections: AtomicU64,
    /// Chunks written (one read's bytes, written once they are due).
    pub chunks: AtomicU64,
    pub bytes: AtomicU64,
    pub resets: AtomicU64,
}

/// What waits in a lane.
enum Item {
    Data {
        bytes: Vec<u8>,
        written: usize,
    },
    /// The source sent EOF: shut the destination's writing side.
    End,
    /// The source was reset: reset the destination.
    Reset,
}

struct Pending {
    release: Instant,
    item: Item,
}

/// One direction: source socket index, destination index, queue.
struct Lane {
    direction: Direction,
    src: usize,
    dst: usize,
    delay: DelayLine,
    queue: VecDeque<Pending>,
    queued: usize,
    /// The source has not sent EOF or failed yet.
    reading: bool,
    /// The destination's buffer was full at the last write.
    blocked: bool,
    /// End or Reset was delivered, or the destination failed.
    done: bool,
}

impl Lane {
    fn new(direction: Direction, src: usize, dst: usize, delay: DelayLine) -> Lane {
        Lane {
            direction,
            src,
            dst,
            delay,
            queue: VecDeque::new(),
            queued: 0,
            reading: true,
            blocked: false,
            done: false,
        }
    }

    fn push(&mut self, arrived: Instant, item: Item) {
        if let Item::Data { bytes, .. } = &item {
            self.queued += bytes.len();
        }
        let release = self.delay.release(arrived);
        self.queue.push_back(Pending { release, item });
    }

    /// Read what the source has, if the lane takes more.
    fn read(&mut self, sockets: &[TcpStream; 2], buf: &mut [u8], counters: &Counters) {
        if !self.reading || self.queued >= MAX_QUEUED {
            return;
        }
        match socket::read_stamped(&sockets[self.src], buf) {
            Ok(Read::Data(n, arrived)) => self.push(
                arrived,
                Item::Data {
                    bytes: buf[..n].to_vec(),
                    written: 0,
                },
            ),
            Ok(Read::Closed) => {
                self.reading = false;
                self.push(Instant::now(), Item::End);
            }
            Ok(Read::WouldBlock) => {}
            Err(e) => {
                self.reading = false;
                counters.resets.fetch_add(1, Ordering::Relaxed);
                eprintln!("netproxy: {} read: {e}", self.direction.label());
                self.push(Instant::now(), Item::Reset);
            }
        }
    }

    /// Write every item that is due, until the destination's buffer is full.
    fn flush(&mut self, sockets: &[TcpStream; 2], now: Instant, counters: &Counters) {
        while !self.done {
            let Some(head) = self.queue.front_mut() else {
                return;
            };
            if head.release > now {
                return;
            }
            let dst = &sockets[self.dst];
            match &mut head.item {
                Item::Data { bytes, written } => {
                    match socket::write_some(dst, &bytes[*written..]) {
                        Ok(Some(n)) => {
                            *written += n;
                            if *written < bytes.len() {
                                continue;
                            }
                            counters.chunks.fetch_add(1, Ordering::Relaxed);
                            counters
                                .bytes
                                .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                            self.queued -= bytes.len();
                            self.queue.pop_front();
                        }
                        Ok(None) => {
                            self.blocked = true;
                            return;
                        }
                        Err(e) => {
                            eprintln!("netproxy: {} write: {e}", self.direction.label());
                            self.finish();
                        }
                    }
                }
                Item::End => {
                    // The peer may be gone already; nothing more to deliver either way.
                    let _ = dst.shutdown(std::net::Shutdown::Write);
                    self.finish();
                }
                Item::Reset => {
                    let _ = socket::reset_on_close(dst);
                    // Wake the other lane's reads of this socket: they see EOF, and the
                    // close at the end sends the RST.
                    let _ = dst.shutdown(std::net::Shutdown::Read);
                    self.finish();
                }
            }
        }
    }

    fn finish(&mut self) {
        self.done = true;
        self.queue.clear();
        self.queued = 0;
    }

    /// The next release this lane waits for (none when it waits for `POLLOUT`).
    fn next_release(&self) -> Option<Instant> {
        if self.done || self.blocked {
            return None;
        }
        self.queue.front().map(|p| p.release)
    }

    fn wants_read(&self) -> bool {
        !self.done && self.reading && self.queued < MAX_QUEUED
    }
}

/// How early before a release the thread stops sleeping: the mean lateness of its
/// timed `ppoll` wake-ups (moving average over about 16) plus [`EARLY_MARGIN`].
///
/// Measured with a 1 ns timer slack on the lab's VM, `ppoll` woke 5 µs late at the
/// median, 7–19 µs at p90 and 16–71 µs at p99 (50 µs more with the default slack).
struct EarlyWake {
    mean_late_ns: f64,
}

impl EarlyWake {
    fn new() -> EarlyWake {
        EarlyWake {
            mean_late_ns: 10_000.0,
        }
    }

    fn early(&self) -> Duration {
        (Duration::from_nanos(self.mean_late_ns as u64) + EARLY_MARGIN).clamp(MIN_EARLY, MAX_EARLY)
    }

    /// A timed sleep meant to end at `wanted` ended at `woke`.
    fn observe(&mut self, wanted: Instant, woke: Instant) {
        let late = woke.saturating_duration_since(wanted).min(MAX_EARLY);
        self.mean_late_ns += (late.as_nanos() as f64 - self.mean_late_ns) / 16.0;
    }
}

/// Move data between `client` and `upstream` until both directions are done.
pub fn run(
    client: TcpStream,
    upstream: TcpStream,
    index: u64,
    model: &DelayModel,
    counters: &Counters,
) {
    socket::tighten_timer_slack();
    let sockets = [client, upstream];
    for s in &sockets {
        let _ = s.set_nodelay(true);
        if let Err(e) = s.set_nonblocking(true) {
            eprintln!("netproxy: connection {index}: {e}");
            return;
        }
        let _ = socket::enable_arrival_stamps(s);
    }
    let mut lanes = [
        Lane::new(
            Direction::Upstream,
            0,
            1,
            model.line(index, Direction::Upstream),
        ),
        Lane::new(
            Direction::Downstream,
            1,
            0,
            model.line(index, Direction::Downstream),
        ),
    ];
    let mut buf = vec![0u8; READ_SIZE];
    let mut early = EarlyWake::new();
    loop {
        let now = Instant::now();
        for lane in &mut lanes {
            lane.flush(&sockets, now, counters);
        }
        if lanes.iter().all(|l| l.done) {
            break;
        }
        // A lane whose destination failed stops reading its source.
        for lane in &mut lanes {
            if lane.done {
                lane.reading = false;
            }
        }
        let mut fds = sockets.each_ref().map(|s| libc::pollfd {
            fd: s.as_raw_fd(),
            events: 0,
            revents: 0,
        });
        for lane in &lanes {
            if lane.wants_read() {
                fds[lane.src].events |= libc::POLLIN;
            }
            if lane.blocked && !lane.done {
                fds[lane.dst].events |= libc::POLLOUT;
            }
        }
        // A socket with nothing to wait for is left out (its hang-up would wake us).
        for fd in &mut fds {
            if fd.events == 0 {
                fd.fd = -1;
            }
        }
        let next = lanes.iter().filter_map(Lane::next_release).min();
        if next.is_none() && fds.iter().all(|f| f.fd < 0) {
            // Nothing to read, nothing queued: a lane's destination is gone while the
            // other waits for nothing. Done.
            break;
        }
        let now = Instant::now();
        let ready = match next {
            Some(at) if at.saturating_duration_since(now) <= early.early() => {
                spin_until(at, &mut fds)
            }
            Some(at) => {
                let wake = at - early.early();
                let ready = socket::poll(&mut fds, Some(wake - now));
                if let Ok(0) = ready {
                    early.observe(wake, Instant::now());
                }
                ready
            }
            None => socket::poll(&mut fds, None),
        };
        if let Err(e) = ready {
            eprintln!("netproxy: connection {index}: poll: {e}");
            break;
        }
        for lane in &mut lanes {
            let src = fds[lane.src].revents;
            if src & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                lane.read(&sockets, &mut buf, counters);
            }
            let dst = fds[lane.dst].revents;
            if dst & (libc::POLLOUT | libc::POLLHUP | libc::POLLERR) != 0 {
                lane.blocked = false;
            }
        }
    }
}

/// Busy-wait until `at`, checking the sockets without sleeping; returns early when one
/// has an event.
fn spin_until(at: Instant, fds: &mut [libc::pollfd; 2]) -> std::io::Result<usize> {
    loop {
        let n = socket::poll(fds, Some(Duration::ZERO))?;
        if n > 0 || Instant::now() >= at {
            return Ok(n);
        }
        std::hint::spin_loop();
    }
}
