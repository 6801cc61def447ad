//! One HTTP/1.1 connection to a subgraph, and one exchange on it at a time.
//!
//! The gateway only ever POSTs a JSON body and reads one answer, so the client is
//! that and no more: the request head is a template made once per subgraph
//! (`POST /path HTTP/1.1`, `host`, `content-type`), completed with the body's length
//! and the caller's `authorization`, and written with the body in one vectored
//! write. The answer is read into the connection's own buffer and its head parsed
//! with httparse; the body is framed by `content-length`, by chunked transfer
//! coding, or by the end of the connection. Nothing else is kept of the head: no
//! header map, no per-exchange channel or task, which is most of what a general
//! client costs (`loadgen`'s hyper client spends about twice wrk's CPU per exchange
//! on the same target).
//!
//! A connection is kept for the next exchange unless the subgraph said `connection:
//! close`, answered HTTP/1.0 without keep-alive, or delimited the body by closing.
//!
//! Of the answer's other headers only `cache-control` is read (parsed into its
//! directives at once, for the `origin-ttl` strategy).

use std::future::Future;
use std::io::IoSlice;
use std::pin::Pin;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use cache_core::CacheDirectives;
use hyper::header::HeaderValue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

/// Most header lines an answer may have.
const MAX_HEADERS: usize = 64;
/// Largest answer head.
const MAX_HEAD: usize = 64 * 1024;

/// The constant part of every request to one subgraph.
pub struct RequestHead {
    /// `POST /path HTTP/1.1\r\nhost: …\r\ncontent-type: application/json\r\ncontent-length: `
    prefix: Bytes,
}

impl RequestHead {
    pub fn new(path: &str, host: &str) -> RequestHead {
        let prefix = format!(
            "POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\naccept: application/json\r\ncontent-length: "
        );
        RequestHead {
            prefix: Bytes::from(prefix),
        }
    }
}

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

/// An open keep-alive connection.
pub struct Connection {
    stream: TcpStream,
    buffer: BytesMut,
    /// The exchanges' timer, re-armed lazily: it stays at an earlier exchange's
    /// deadline, which always comes first, and moves to the current one when it
    /// fires early. So the timer wheel is touched about once per timeout per
    /// connection, not once per exchange.
    timer: Pin<Box<Sleep>>,
    /// When it was last put back in the pool.
    idle_since: Instant,
}

/// What the answer's head says about its body and the connection.
struct Framing {
    status: u16,
    head_len: usize,
    body: BodyLength,
    keep_alive: bool,
    cache_control: Option<CacheDirectives>,
}

enum BodyLength {
    Known(usize),
    Chunked,
    UntilClose,
}

impl Connection {
    pub async fn open(authority: &str) -> std::io::Result<Connection> {
        let stream = TcpStream::connect(authority).await?;
        stream.set_nodelay(true)?;
        Ok(Connection {
            stream,
            buffer: BytesMut::with_capacity(8 * 1024),
            timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
            idle_since: Instant::now(),
        })
    }

    /// Note that the connection goes back to the pool now.
    pub fn set_idle(&mut self, now: Instant) {
        self.idle_since = now;
    }

    /// How long it has waited in the pool, as of `now`.
    pub fn idle_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.idle_since)
    }

    /// Whether the subgraph has closed the connection while it sat idle (checked
    /// without waiting).
    pub fn closed_while_idle(&self) -> bool {
        let mut probe = [0u8; 1];
        match self.stream.try_read(&mut probe) {
            Ok(0) => true,
            Ok(_) => true, // bytes nobody asked for: not a clean connection
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        }
    }

    /// Send one request and read its whole answer: the status and the body, whether
    /// the connection can be used again, and the answer's `cache-control`.
    pub async fn exchange(
        &mut self,
        head: &RequestHead,
        body: &Bytes,
        authorization: Option<&HeaderValue>,
        deadline: Instant,
        max_body: usize,
    ) -> Result<Exchanged, ExchangeError> {
        if self.timer.is_elapsed() {
            self.timer.as_mut().reset(deadline);
        }
        let mut timer = self.timer.as_mut();
        let work = exchange(
            &mut self.stream,
            &mut self.buffer,
            head,
            body,
            authorization,
            max_body,
        );
        let mut work = std::pin::pin!(work);
        std::future::poll_fn(|cx| {
            if let std::task::Poll::Ready(out) = work.as_mut().poll(cx) {
                return std::task::Poll::Ready(out);
            }
            while timer.as_mut().poll(cx).is_ready() {
                if Instant::now() >= deadline {
                    return std::task::Poll::Ready(Err(ExchangeError::Timeout));
                }
                timer.as_mut().reset(deadline);
            }
            std::task::Poll::Pending
        })
        .await
    }
}

/// An exchange's answer: status, body, whether the connection is reusable, and the
/// answer's `cache-control` directives.
pub type Exchanged = (u16, Bytes, bool, Option<CacheDirectives>);

fn io_error(e: std::io::Error, answered: bool) -> ExchangeError {
    ExchangeError::Io {
        detail: e.to_string(),
        answered,
    }
}

async fn exchange(
    stream: &mut TcpStream,
    buffer: &mut BytesMut,
    head: &RequestHead,
    body: &Bytes,
    authorization: Option<&HeaderValue>,
    max_body: usize,
) -> Result<Exchanged, ExchangeError> {
    // The head's variable part: the length, the caller's authorization, the end.
    let mut tail = itoa::Buffer::new().format(body.len()).as_bytes().to_vec();
    if let Some(auth) = authorization {
        tail.extend_from_slice(b"\r\nauthorization: ");
        tail.extend_from_slice(auth.as_bytes());
    }
    tail.extend_from_slice(b"\r\n\r\n");
    write_all(stream, &[&head.prefix, &tail, body]).await?;
    buffer.clear();
    let framing = loop {
        if let Some(framing) = parse_head(buffer)? {
            break framing;
        }
        if buffer.len() > MAX_HEAD {
            return Err(ExchangeError::Protocol(
                "the answer's head is too large".into(),
            ));
        }
        let answered = !buffer.is_empty();
        let n = stream
            .read_buf(buffer)
            .await
            .map_err(|e| io_error(e, answered))?;
        if n == 0 {
            return Err(ExchangeError::Io {
                detail: "the subgraph closed the connection".into(),
                answered,
            });
        }
    };
    buffer.advance(framing.head_len);
    let (body, reusable) = match framing.body {
        BodyLength::Known(length) => {
            if length > max_body {
                return Err(ExchangeError::TooLarge);
            }
            while buffer.len() < length {
                if stream
                    .read_buf(buffer)
                    .await
                    .map_err(|e| io_error(e, true))?
                    == 0
                {
                    return Err(ExchangeError::Io {
                        detail: "the subgraph closed the connection mid-answer".into(),
                        answered: true,
                    });
                }
            }
            // Anything after the body was never asked for: drop the connection.
            let extra = buffer.len() > length;
            (
                buffer.split_to(length).freeze(),
                framing.keep_alive && !extra,
            )
        }
        BodyLength::Chunked => {
            let body = read_chunked(stream, buffer, max_body).await?;
            (body, framing.keep_alive && buffer.is_empty())
        }
        BodyLength::UntilClose => {
            loop {
                if buffer.len() > max_body {
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
            (buffer.split().freeze(), false)
        }
    };
    Ok((framing.status, body, reusable, framing.cache_control))
}

/// Write every slice, however the kernel splits the writes.
async fn write_all(stream: &mut TcpStream, parts: &[&[u8]]) -> Result<(), ExchangeError> {
    let mut slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
    let mut slices = &mut slices[..];
    while !slices.is_empty() {
        let n = stream
            .write_vectored(slices)
            .await
            .map_err(|e| io_error(e, false))?;
        if n == 0 {
            return Err(ExchangeError::Io {
                detail: "the subgraph closed the connection".into(),
                answered: false,
            });
        }
        IoSlice::advance_slices(&mut slices, n);
    }
    Ok(())
}

/// The answer's head, once `buffer` holds all of it (skipping `1xx` answers).
fn parse_head(buffer: &mut BytesMut) -> Result<Option<Framing>, ExchangeError> {
    loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        let head_len = match response.parse(buffer) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(ExchangeError::Protocol(format!("bad answer head: {e}"))),
        };
        let status = response.code.unwrap_or(0);
        if (100..200).contains(&status) {
            buffer.advance(head_len);
            continue;
        }
        let mut keep_alive = response.version == Some(1);
        let mut length = None;
        let mut chunked = false;
        let mut cache_control = None;
        for header in response.headers.iter() {
            let name = header.name;
            if name.eq_ignore_ascii_case("content-length") {
                let value = std::str::from_utf8(header.value)
                    .ok()
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .ok_or_else(|| ExchangeError::Protocol("bad content-length".into()))?;
                length = Some(value);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = header
                    .value
                    .rsplit(|&b| b == b',')
                    .next()
                    .is_some_and(|coding| coding.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            } else if name.eq_ignore_ascii_case("cache-control") {
                cache_control = Some(CacheDirectives::parse(header.value));
            } else if name.eq_ignore_ascii_case("connection") {
                let value = header.value.trim_ascii();
                if value.eq_ignore_ascii_case(b"close") {
                    keep_alive = false;
                } else if value.eq_ignore_ascii_case(b"keep-alive") {
                    keep_alive = true;
                }
            }
        }
        // No body: 204, 304.
        let body = if status == 204 || status == 304 {
            BodyLength::Known(0)
        } else if chunked {
            BodyLength::Chunked
        } else if let Some(n) = length {
            BodyLength::Known(n)
        } else {
            BodyLength::UntilClose
        };
        return Ok(Some(Framing {
            status,
            head_len,
            body,
            keep_alive,
            cache_control,
        }));
    }
}

/// A chunked body, decoded; `buffer` holds what was read after the head and keeps
/// whatever follows the body.
async fn read_chunked(
    stream: &mut TcpStream,
    buffer: &mut BytesMut,
    max_body: usize,
) -> Result<Bytes, ExchangeError> {
    let mut body = BytesMut::new();
    loop {
        // The size line.
        let line_end = loop {
            if let Some(i) = buffer.windows(2).position(|w| w == b"\r\n") {
                break i;
            }
            if buffer.len() > 1024 {
                return Err(ExchangeError::Protocol("bad chunk size line".into()));
            }
            fill(stream, buffer).await?;
        };
        let line = &buffer[..line_end];
        let digits = line.split(|&b| b == b';').next().unwrap_or_default();
        let size = std::str::from_utf8(digits)
            .ok()
            .and_then(|d| usize::from_str_radix(d.trim(), 16).ok())
            .ok_or_else(|| ExchangeError::Protocol("bad chunk size".into()))?;
        buffer.advance(line_end + 2);
        if size == 0 {
            // Trailers, then the empty line.
            loop {
                if let Some(i) = buffer.windows(2).position(|w| w == b"\r\n") {
                    buffer.advance(i + 2);
                    if i == 0 {
                        return Ok(body.freeze());
                    }
                    continue;
                }
                if buffer.len() > MAX_HEAD {
                    return Err(ExchangeError::Protocol("the trailers are too large".into()));
                }
                fill(stream, buffer).await?;
            }
        }
        if body.len() + size > max_body {
            return Err(ExchangeError::TooLarge);
        }
        while buffer.len() < size + 2 {
            fill(stream, buffer).await?;
        }
        body.extend_from_slice(&buffer[..size]);
        if &buffer[size..size + 2] != b"\r\n" {
            return Err(ExchangeError::Protocol(
                "a chunk does not end with CRLF".into(),
            ));
        }
        buffer.advance(size + 2);
    }
}

async fn fill(stream: &mut TcpStream, buffer: &mut BytesMut) -> Result<(), ExchangeError> {
    if stream
        .read_buf(buffer)
        .await
        .map_err(|e| io_error(e, true))?
        == 0
    {
        return Err(ExchangeError::Io {
            detail: "the subgraph closed the connection mid-answer".into(),
            answered: true,
        });
    }
    Ok(())
}
