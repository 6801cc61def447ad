//! Reading one answer: its head (skipping `1xx` ones), then its body by whatever
//! framing the head gives.

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::head::{self, BodyLength};
use crate::{fill, io_error, AnswerRules, ExchangeError};

/// The most of an answer's announced body reserved before it has come.
const RESERVED_AT_ONCE: usize = 1 << 20;

/// The room a connection's buffer starts with, and the least kept for an answer.
pub(crate) const FIRST_ROOM: usize = 8 * 1024;

/// One answer, read whole.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Bytes,
    /// Whether the connection may carry another exchange.
    pub reusable: bool,
}

/// Read the answer to the request just written. `buffer` is the connection's; it is
/// empty between exchanges. `room`: the bytes its recent answers took (head and
/// body), updated with this one's.
///
/// That much room is made before the answer comes, so that an answer already
/// waiting is taken in one read: with only what an earlier answer left of the
/// buffer, two answers in three of the deep query took two reads (a system call
/// each) and the first part was copied once more into a larger buffer. The room
/// follows the largest recent answer and shrinks by an eighth per smaller one, so
/// that a connection whose requests alternate between a small and a large answer
/// keeps room for the large one.
pub(crate) async fn read(
    stream: &mut TcpStream,
    buffer: &mut BytesMut,
    rules: AnswerRules,
    room: &mut usize,
    mut on_header: impl FnMut(&str, &[u8]),
) -> Result<Answer, ExchangeError> {
    buffer.clear();
    buffer.reserve((*room).clamp(FIRST_ROOM, RESERVED_AT_ONCE));
    let framing = head::read(stream, buffer, rules, &mut on_header).await?;
    buffer.advance(framing.head_len);
    let (body, reusable) = match framing.body {
        BodyLength::Known(length) => {
            if length > rules.max_body {
                return Err(ExchangeError::TooLarge);
            }
            // Room for the whole body at once: grown a read at a time, a 100 KB body
            // was copied into a larger buffer again and again as it came. Up to
            // 1 MiB only, so that a peer that names a large length and sends little
            // holds no more memory than it sends beyond that.
            buffer.reserve(length.saturating_sub(buffer.len()).min(RESERVED_AT_ONCE));
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
    let took = framing.head_len.saturating_add(body.len());
    *room = took.max(*room - *room / 8);
    Ok(Answer {
        status: framing.status,
        body,
        reusable,
    })
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
        let (size, line_len) = loop {
            if let Some(line) = head::chunk_size_line(buffer)? {
                break line;
            }
            fill(stream, buffer).await?;
        };
        buffer.advance(line_len);
        if size == 0 {
            loop {
                if let Some(n) = head::trailers_len(buffer)? {
                    buffer.advance(n);
                    return Ok(body.freeze());
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
