//! Reading one answer: its head (skipping `1xx` ones), then its body by whatever
//! framing the head gives.

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::{io_error, AnswerRules, ExchangeError};

/// Most header lines an answer may have.
const MAX_HEADERS: usize = 64;
/// Largest answer head (and largest chunked trailer section).
const MAX_HEAD: usize = 64 * 1024;
/// Longest chunk-size line.
const MAX_CHUNK_LINE: usize = 1024;

/// One answer, read whole.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Bytes,
    /// Whether the connection may carry another exchange.
    pub reusable: bool,
}

/// What the answer's head says about its body and the connection.
struct Framing {
    status: u16,
    head_len: usize,
    body: BodyLength,
    keep_alive: bool,
}

enum BodyLength {
    Known(usize),
    Chunked,
    UntilClose,
}

/// Read the answer to the request just written. `buffer` is the connection's; it is
/// empty between exchanges.
pub(crate) async fn read(
    stream: &mut TcpStream,
    buffer: &mut BytesMut,
    rules: AnswerRules,
    mut on_header: impl FnMut(&str, &[u8]),
) -> Result<Answer, ExchangeError> {
    buffer.clear();
    let framing = loop {
        if let Some(framing) = parse_head(buffer, rules, &mut on_header)? {
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
                detail: "the peer closed the connection".into(),
                answered,
            });
        }
    };
    buffer.advance(framing.head_len);
    let (body, reusable) = match framing.body {
        BodyLength::Known(length) => {
            if length > rules.max_body {
                return Err(ExchangeError::TooLarge);
            }
            while buffer.len() < length {
                fill(stream, buffer).await?;
            }
            // Anything after the body was never asked for: drop the connection.
            let extra = buffer.len() > length;
            (
                buffer.split_to(length).freeze(),
                framing.keep_alive && !extra,
            )
        }
        BodyLength::Chunked => {
            let body = read_chunked(stream, buffer, rules.max_body).await?;
            (body, framing.keep_alive && buffer.is_empty())
        }
        BodyLength::UntilClose => {
            loop {
                if buffer.len() > rules.max_body {
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
    Ok(Answer {
        status: framing.status,
        body,
        reusable,
    })
}

/// The answer's head, once `buffer` holds all of it (skipping `1xx` answers).
fn parse_head(
    buffer: &mut BytesMut,
    rules: AnswerRules,
    on_header: &mut impl FnMut(&str, &[u8]),
) -> Result<Option<Framing>, ExchangeError> {
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
            } else if name.eq_ignore_ascii_case("connection") {
                let value = header.value.trim_ascii();
                if value.eq_ignore_ascii_case(b"close") {
                    keep_alive = false;
                } else if value.eq_ignore_ascii_case(b"keep-alive") {
                    keep_alive = true;
                }
            }
            on_header(name, header.value);
        }
        // No body: an answer to HEAD, 204, 304.
        let body = if rules.head_request || status == 204 || status == 304 {
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
            if buffer.len() > MAX_CHUNK_LINE {
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
        if body.len().saturating_add(size) > max_body {
            return Err(ExchangeError::TooLarge);
        }
        let framed = size
            .checked_add(2)
            .ok_or_else(|| ExchangeError::Protocol("bad chunk size".into()))?;
        while buffer.len() < framed {
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

/// Read more of an answer that has begun; the end of the stream here is an error.
async fn fill(stream: &mut TcpStream, buffer: &mut BytesMut) -> Result<(), ExchangeError> {
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
