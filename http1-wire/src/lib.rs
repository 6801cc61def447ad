//! A lean HTTP/1.1 client connection: one exchange at a time over a kept-alive TCP
//! stream.
//!
//! Two parts of the lab send the same kind of request over and over and need nothing
//! of a general HTTP client: the gateway's upstream (a JSON `POST` to a subgraph) and
//! loadgen's benchmark connections. Both hand [`Connection::exchange`] a request
//! already on the wire (its head and body as byte slices, written with one vectored
//! write) and get the answer's status and whole body back. The answer is read into the
//! connection's own buffer and its head parsed with httparse; the body is framed by
//! `content-length`, by chunked transfer coding, or by the end of the connection.
//! Nothing else is kept of the head: no header map, no per-exchange channel or task.
//! Callers that want a header (the gateway reads `cache-control`) see each one through
//! a callback while the head is parsed.
//!
//! [`Connection::exchange`] hands the body out as [`bytes::Bytes`] that outlive the
//! exchange (the gateway keeps them). [`Connection::exchange_in_place`] leaves it in a
//! buffer lent by [`Buffers`] instead, read through [`Connection::body`] until the
//! caller releases it: for loadgen, which only judges an answer and forgets it, that
//! saves a copy and a growing buffer per answer, and keeps the kernel writing answers
//! to memory still in cache (on the 98.5 KB deep answers, the copy and the growth were
//! a fifth of loadgen's CPU, and the kernel's copy into buffers out of cache cost it
//! twice what wrk's cost wrk).
//!
//! That is most of what a general client costs: hyper's client connection spent about
//! twice wrk's CPU per exchange on the same target, mostly in its header map, its
//! dispatch channel and the task hand-offs between them.
//!
//! A connection is reusable after an exchange unless the peer said `connection:
//! close`, answered HTTP/1.0 without keep-alive, delimited the body by closing, or sent
//! bytes after the answer. Timeouts are the caller's deadline, checked by a timer
//! re-armed lazily (see [`Connection::exchange`]).
//!
//! # Concurrency
//!
//! A [`Connection`] is owned by one task at a time and runs its I/O in that task: the
//! gateway keeps idle ones in a pool and moves one into the request's task; loadgen
//! keeps one per benchmark connection. [`Buffers`] are shared by the connections of one
//! thread (they are not `Sync`): loadgen has one per worker thread, whose runtime runs
//! all of that thread's connections.

mod answer;
mod head;
mod in_place;

use std::future::Future;
use std::io::IoSlice;
use std::ops::Range;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio::time::{Instant, Sleep};

pub use answer::Answer;
pub use in_place::{AnswerInPlace, Buffers};

/// How an exchange went wrong.
#[derive(Debug)]
pub enum ExchangeError {
    /// The connection failed or closed; `answered` says whether any byte of an
    /// answer had arrived (if not, the request may never have been read).
    Io { detail: String, answered: bool },
    /// The answer is not HTTP/1.1 as this client reads it.
    Protocol(String),
    /// The body is larger than allowed.
    TooLarge,
    /// The deadline passed.
    Timeout,
}

/// What the caller allows an answer to be.
#[derive(Debug, Clone, Copy)]
pub struct AnswerRules {
    /// Largest body accepted ([`ExchangeError::TooLarge`] beyond).
    pub max_body: usize,
    /// The request was `HEAD`: the answer has no body, whatever its head says.
    pub head_request: bool,
}

/// An open keep-alive connection.
pub struct Connection {
    stream: TcpStream,
    buffer: BytesMut,
    /// The room made in `buffer` for the next answer (see [`answer::read`]).
    room: usize,
    /// The buffer [`Connection::exchange_in_place`] read its answer into (one of
    /// [`Buffers`], none before the answer arrives and after a release), and where the
    /// answer's body is in it.
    place: Vec<u8>,
    body: Range<usize>,
    /// The exchanges' timer, re-armed lazily: it stays at an earlier exchange's
    /// deadline, which always comes first, and moves to the current one when it
    /// fires early. So the timer wheel is touched about once per timeout per
    /// connection, not once per exchange.
    timer: Pin<Box<Sleep>>,
    /// When it was last put back to wait for its next exchange.
    idle_since: Instant,
}

impl Connection {
    /// Connect (with `TCP_NODELAY`: small requests leave at once). Must be called
    /// inside a tokio runtime with its timer enabled.
    pub async fn open(addr: impl ToSocketAddrs) -> std::io::Result<Connection> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Connection {
            stream,
            buffer: BytesMut::with_capacity(answer::FIRST_ROOM),
            room: answer::FIRST_ROOM,
            place: Vec::new(),
            body: 0..0,
            timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
            idle_since: Instant::now(),
        })
    }

    /// Note that the connection starts waiting for its next exchange now.
    pub fn set_idle(&mut self, now: Instant) {
        self.idle_since = now;
    }

    /// How long it has waited, as of `now`.
    pub fn idle_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.idle_since)
    }

    /// Whether the peer has closed the connection while it sat idle (checked
    /// without waiting, at the cost of one `recv` system call).
    pub fn closed_while_idle(&self) -> bool {
        let mut probe = [0u8; 1];
        match self.stream.try_read(&mut probe) {
            Ok(0) => true,
            Ok(_) => true, // bytes nobody asked for: not a clean connection
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        }
    }

    /// Send one request (`request`: its bytes in order, head then body) and read its
    /// whole answer, before `deadline`. `on_header` sees each header of the answer's
    /// final head (name, value).
    pub async fn exchange(
        &mut self,
        request: &[&[u8]],
        deadline: Instant,
        rules: AnswerRules,
        on_header: impl FnMut(&str, &[u8]),
    ) -> Result<Answer, ExchangeError> {
        self.body = 0..0;
        let Connection {
            stream,
            buffer,
            room,
            timer,
            ..
        } = self;
        let work = async {
            write_all(stream, request).await?;
            answer::read(stream, buffer, rules, room, on_header).await
        };
        before(timer, deadline, work).await
    }

    /// [`Connection::exchange`], but the body stays in a buffer taken from `buffers`
    /// as the answer begins to arrive, where [`Connection::body`] shows it until
    /// [`Connection::release`] or the next exchange: no allocation and no copy of it
    /// once the buffers have grown to the largest answer.
    pub async fn exchange_in_place(
        &mut self,
        request: &[&[u8]],
        deadline: Instant,
        rules: AnswerRules,
        buffers: &Buffers,
        on_header: impl FnMut(&str, &[u8]),
    ) -> Result<AnswerInPlace, ExchangeError> {
        let Connection {
            stream,
            place,
            body,
            timer,
            ..
        } = self;
        let work = async {
            write_all(stream, request).await?;
            in_place::read(stream, buffers, place, body, rules, on_header).await
        };
        let answer = before(timer, deadline, work).await;
        if answer.is_err() {
            self.release(buffers);
        }
        answer
    }

    /// The body of the last answer read by [`Connection::exchange_in_place`]; empty
    /// after a failed exchange, a release, and [`Connection::exchange`].
    pub fn body(&self) -> &[u8] {
        self.place.get(self.body.clone()).unwrap_or_default()
    }

    /// Give the buffer of the last answer read in place back to `buffers` (its body is
    /// no longer needed), so that the connection holds none while it waits.
    pub fn release(&mut self, buffers: &Buffers) {
        self.body = 0..0;
        buffers.give(std::mem::take(&mut self.place));
    }
}

/// Run one exchange's `work` to its end or until `deadline`, on the connection's
/// lazily re-armed `timer` (see the field's comment).
async fn before<T>(
    timer: &mut Pin<Box<Sleep>>,
    deadline: Instant,
    work: impl Future<Output = Result<T, ExchangeError>>,
) -> Result<T, ExchangeError> {
    if timer.is_elapsed() {
        timer.as_mut().reset(deadline);
    }
    let mut work = std::pin::pin!(work);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = work.as_mut().poll(cx) {
            return Poll::Ready(out);
        }
        while timer.as_mut().poll(cx).is_ready() {
            if Instant::now() >= deadline {
                return Poll::Ready(Err(ExchangeError::Timeout));
            }
            timer.as_mut().reset(deadline);
        }
        Poll::Pending
    })
    .await
}

/// Read more of an answer that has begun; the end of the stream here is an error.
async fn fill(stream: &mut TcpStream, buffer: &mut impl BufMut) -> Result<(), ExchangeError> {
    if stream
        .read_buf(buffer)
        .await
        .map_err(|e| io_error(e, true))?
        == 0
    {
        return Err(ExchangeError::Io {
            detail: "the peer closed the connection mid-answer".into(),
            answered: true,
        });
    }
    Ok(())
}

fn io_error(e: std::io::Error, answered: bool) -> ExchangeError {
    ExchangeError::Io {
        detail: e.to_string(),
        answered,
    }
}

/// Most parts a request is written from without a heap allocation.
const INLINE_PARTS: usize = 4;

/// Write every slice, however the kernel splits the writes.
async fn write_all(stream: &mut TcpStream, parts: &[&[u8]]) -> Result<(), ExchangeError> {
    let mut inline = [IoSlice::new(&[]); INLINE_PARTS];
    let mut heap = Vec::new();
    let mut slices: &mut [IoSlice<'_>] = if parts.len() <= INLINE_PARTS {
        for (slot, part) in inline.iter_mut().zip(parts) {
            *slot = IoSlice::new(part);
        }
        &mut inline[..parts.len()]
    } else {
        heap.extend(parts.iter().map(|p| IoSlice::new(p)));
        &mut heap[..]
    };
    while !slices.is_empty() {
        let n = stream
            .write_vectored(slices)
            .await
            .map_err(|e| io_error(e, false))?;
        if n == 0 {
            return Err(ExchangeError::Io {
                detail: "the peer closed the connection".into(),
                answered: false,
            });
        }
        IoSlice::advance_slices(&mut slices, n);
    }
    Ok(())
}
