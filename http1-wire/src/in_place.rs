//! Reading one answer in place: the body is left in a buffer the connection holds (a
//! chunked one joined there), where the caller reads it until it lets the buffer go.
//!
//! That is what a load generator needs of a large answer it only classifies or checks
//! and then forgets: [`crate::Answer`]'s reader instead hands the body out as
//! [`bytes::Bytes`] that outlive the exchange, so its buffer is never reused at once.
//!
//! The buffers come from [`Buffers`], shared by the connections of one thread. A
//! connection takes one only once its answer has begun to arrive, and gives it back
//! when the caller is done ([`crate::Connection::release`]); buffers are cleared, not
//! freed. So the few buffers in use at a time are the ones written last, still in the
//! CPU's cache, and once they have grown to the largest answer, an answer costs no
//! allocation and no copy beyond the kernel's: a `content-length` body is read straight
//! to where it stays (the buffer grown to the exact answer size first, when smaller),
//! and a chunked one moves each chunk's data down over the size lines before it, within
//! the buffer. A buffer per connection instead would have the kernel write each 98.5 KB
//! deep answer to memory last touched a hundred answers before: measured on loadgen's
//! deep benchmark, that made the kernel's copy cost twice wrk's, whose one 8 KB buffer
//! per connection stays in cache.

use std::cell::RefCell;
use std::future::Future;
use std::ops::Range;
use std::task::ready;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::head::{self, BodyLength};
use crate::{fill, io_error, AnswerRules, ExchangeError};

/// What a fresh buffer is given room for: a small answer in one read.
const FIRST_CAPACITY: usize = 16 * 1024;

/// Room a buffer keeps past the end of the answer it is grown to. The read that
/// completes an answer then asks for more than the answer holds, and returns less:
/// that tells tokio the socket is empty (see [`read_first`]). Bytes that do land
/// there were never asked for, and the connection is not reused.
const PAST_THE_END: usize = 512;

/// The buffers lent to the answers of one thread's connections, each from when its
/// answer begins to arrive until the caller releases it; the last one given back is
/// the first taken.
#[derive(Debug, Default)]
pub struct Buffers {
    free: RefCell<Vec<Vec<u8>>>,
}

impl Buffers {
    pub fn new() -> Buffers {
        Buffers::default()
    }

    fn take(&self) -> Vec<u8> {
        let mut buffer = self.free.borrow_mut().pop().unwrap_or_default();
        if buffer.capacity() < FIRST_CAPACITY {
            buffer.reserve(FIRST_CAPACITY);
        }
        buffer
    }

    /// Take back `buffer` (nothing when it holds no allocation).
    pub(crate) fn give(&self, mut buffer: Vec<u8>) {
        if buffer.capacity() > 0 {
            buffer.clear();
            self.free.borrow_mut().push(buffer);
        }
    }
}

/// The status and reuse of an answer read in place; its body is
/// [`crate::Connection::body`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerInPlace {
    pub status: u16,
    /// Whether the connection may carry another exchange.
    pub reusable: bool,
}

/// Read the answer to the request just written into `buffer` (the connection's: none
/// until the answer's first bytes are there, then one of `buffers`); `body` is set to
/// where its body is in `buffer`.
pub(crate) async fn read(
    stream: &mut TcpStream,
    buffers: &Buffers,
    buffer: &mut Vec<u8>,
    body: &mut Range<usize>,
    rules: AnswerRules,
    mut on_header: impl FnMut(&str, &[u8]),
) -> Result<AnswerInPlace, ExchangeError> {
    *body = 0..0;
    buffers.give(std::mem::take(buffer));
    // Wait holding no buffer: one is taken when the answer's first bytes are there.
    match read_first(stream, buffers, buffer).await {
        Ok(0) => {
            return Err(ExchangeError::Io {
                detail: "the peer closed the connection".into(),
                answered: false,
            })
        }
        Ok(_) => {}
        Err(e) => return Err(io_error(e, false)),
    }
    let framing = head::read(stream, buffer, rules, &mut on_header).await?;
    let start = framing.head_len;
    let (end, reusable) = match framing.body {
        BodyLength::Known(length) => {
            if length > rules.max_body {
                return Err(ExchangeError::TooLarge);
            }
            let end = start.checked_add(length).ok_or(ExchangeError::TooLarge)?;
            fill_to(stream, buffer, end).await?;
            // Anything after the body was never asked for: drop the connection.
            (end, framing.keep_alive && buffer.len() == end)
        }
        BodyLength::Chunked => {
            let (end, rest) = join_chunks(stream, buffer, start, rules.max_body).await?;
            (end, framing.keep_alive && rest == buffer.len())
        }
        BodyLength::UntilClose => {
            loop {
                if buffer.len() - start > rules.max_body {
                    return Err(ExchangeError::TooLarge);
                }
                if stream
                    .read_buf(buffer)
                    .await
                    .map_err(|e| io_error(e, true))?
                    == 0
                {
                    break;
                }
            }
            (buffer.len(), false)
        }
    };
    *body = start..end;
    Ok(AnswerInPlace {
        status: framing.status,
        reusable,
    })
}

/// Wait until the socket holds bytes, then read what it holds into `buffer`, taken
/// from `buffers` for the read and given back when there is nothing to read yet.
///
/// The read goes through tokio's `AsyncRead`, which takes a read that returns less
/// than the room it was given as proof that the socket is empty and clears its
/// readiness (race-free: only if no new event came in meanwhile); so does the read
/// that completes an answer (see [`PAST_THE_END`]). Readiness left set would make the
/// next answer's wait start with a `recv` that fails with `EAGAIN`: one system call
/// more per answer, which `try_read` costs. When the read has nothing, or the task's
/// cooperative budget is spent, the wait is `Pending` to the caller's task, which
/// yields: a loop here that turned it into a retry would spin once the budget of the
/// task running every connection of a loadgen thread ran out.
async fn read_first(
    stream: &mut TcpStream,
    buffers: &Buffers,
    buffer: &mut Vec<u8>,
) -> std::io::Result<usize> {
    std::future::poll_fn(|cx| {
        ready!(stream.poll_read_ready(cx))?;
        *buffer = buffers.take();
        let polled = {
            let mut read = std::pin::pin!(stream.read_buf(&mut *buffer));
            read.as_mut().poll(cx)
        };
        if polled.is_pending() {
            buffers.give(std::mem::take(buffer));
        }
        polled
    })
    .await
}

/// Read until `buffer` holds `len` bytes, growing it once to that size (and
/// [`PAST_THE_END`]) if it is smaller: not by doubling, which would copy what has
/// arrived again each time.
async fn fill_to(
    stream: &mut TcpStream,
    buffer: &mut Vec<u8>,
    len: usize,
) -> Result<(), ExchangeError> {
    grow_to(buffer, len.saturating_add(PAST_THE_END))?;
    while buffer.len() < len {
        fill(stream, buffer).await?;
    }
    Ok(())
}

/// Decode the chunked body that starts at `start` in `buffer`, moving each chunk's
/// data down to follow the one before. Returns where the joined body ends and where
/// the bytes after the answer (its trailers read) start.
async fn join_chunks(
    stream: &mut TcpStream,
    buffer: &mut Vec<u8>,
    start: usize,
    max_body: usize,
) -> Result<(usize, usize), ExchangeError> {
    // `end`: the joined body so far ends here; `at`: the next size line starts here.
    let mut end = start;
    let mut at = start;
    loop {
        let (size, line_len) = loop {
            if let Some(line) = head::chunk_size_line(&buffer[at..])? {
                break line;
            }
            fill(stream, buffer).await?;
        };
        at += line_len;
        if size == 0 {
            loop {
                if let Some(n) = head::trailers_len(&buffer[at..])? {
                    return Ok((end, at + n));
                }
                fill(stream, buffer).await?;
            }
        }
        if (end - start).saturating_add(size) > max_body {
            return Err(ExchangeError::TooLarge);
        }
        let framed = size
            .checked_add(2)
            .ok_or_else(|| ExchangeError::Protocol("bad chunk size".into()))?;
        let chunk_end = at.checked_add(framed).ok_or(ExchangeError::TooLarge)?;
        // Room for this chunk at once, or for twice what is held: a body of many
        // small chunks grows the buffer by doubling, not once per chunk.
        if buffer.capacity() < chunk_end {
            grow_to(buffer, chunk_end.max(buffer.capacity().saturating_mul(2)))?;
        }
        while buffer.len() < chunk_end {
            fill(stream, buffer).await?;
        }
        if &buffer[at + size..chunk_end] != b"\r\n" {
            return Err(ExchangeError::Protocol(
                "a chunk does not end with CRLF".into(),
            ));
        }
        buffer.copy_within(at..at + size, end);
        end += size;
        at = chunk_end;
    }
}

/// Give `buffer` room for `len` bytes in all; an allocation that fails (a length no
/// memory holds) is a body too large, not an abort.
fn grow_to(buffer: &mut Vec<u8>, len: usize) -> Result<(), ExchangeError> {
    if buffer.capacity() < len {
        buffer
            .try_reserve_exact(len - buffer.len())
            .map_err(|_| ExchangeError::TooLarge)?;
    }
    Ok(())
}
