//! What an answer's head says: its status, how its body is framed, and whether the
//! connection stays open. Shared by both ways of reading an answer (whole into
//! [`crate::Answer`], or in place in the connection's buffer).

use bytes::BufMut;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::{io_error, AnswerRules, ExchangeError};

/// Most header lines an answer may have.
const MAX_HEADERS: usize = 64;
/// Largest answer head (and largest chunked trailer section).
pub(crate) const MAX_HEAD: usize = 64 * 1024;

/// What the answer's head says about its body and the connection.
pub(crate) struct Framing {
    pub(crate) status: u16,
    /// Bytes of the head, `1xx` heads before it included: where the body starts.
    pub(crate) head_len: usize,
    pub(crate) body: BodyLength,
    pub(crate) keep_alive: bool,
}

pub(crate) enum BodyLength {
    Known(usize),
    Chunked,
    UntilClose,
}

/// Read from `stream` into `buffer` (what has arrived of the answer so far) until it
/// holds the whole head, and parse it (see [`parse`]).
pub(crate) async fn read<B: BufMut + AsRef<[u8]>>(
    stream: &mut TcpStream,
    buffer: &mut B,
    rules: AnswerRules,
    on_header: &mut impl FnMut(&str, &[u8]),
) -> Result<Framing, ExchangeError> {
    loop {
        if let Some(framing) = parse(buffer.as_ref(), rules, on_header)? {
            return Ok(framing);
        }
        if buffer.as_ref().len() > MAX_HEAD {
            return Err(ExchangeError::Protocol(
                "the answer's head is too large".into(),
            ));
        }
        let answered = !buffer.as_ref().is_empty();
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
    }
}

/// The answer's head, once `bytes` (what has arrived of the answer) holds all of it,
/// `1xx` answers skipped; `None` while it is incomplete. `on_header` sees the headers
/// of the final head only, once.
pub(crate) fn parse(
    bytes: &[u8],
    rules: AnswerRules,
    on_header: &mut impl FnMut(&str, &[u8]),
) -> Result<Option<Framing>, ExchangeError> {
    let mut start = 0;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        let head_len = match response.parse(&bytes[start..]) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(ExchangeError::Protocol(format!("bad answer head: {e}"))),
        };
        let status = response.code.unwrap_or(0);
        if (100..200).contains(&status) {
            start += head_len;
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
            head_len: start + head_len,
            body,
            keep_alive,
        }));
    }
}

/// The size of the chunk whose size line starts `bytes`, and the length of that line
/// with its CRLF; `None` while the line is incomplete.
pub(crate) fn chunk_size_line(bytes: &[u8]) -> Result<Option<(usize, usize)>, ExchangeError> {
    /// Longest chunk-size line.
    const MAX_CHUNK_LINE: usize = 1024;
    let Some(line_end) = find_crlf(bytes) else {
        if bytes.len() > MAX_CHUNK_LINE {
            return Err(ExchangeError::Protocol("bad chunk size line".into()));
        }
        return Ok(None);
    };
    let line = &bytes[..line_end];
    let digits = line.split(|&b| b == b';').next().unwrap_or_default();
    let size = std::str::from_utf8(digits)
        .ok()
        .and_then(|d| usize::from_str_radix(d.trim(), 16).ok())
        .ok_or_else(|| ExchangeError::Protocol("bad chunk size".into()))?;
    Ok(Some((size, line_end + 2)))
}

/// Where the first CRLF of `bytes` starts.
pub(crate) fn find_crlf(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|w| w == b"\r\n")
}

/// The length of a chunked body's trailer section (each trailer line and the empty
/// line that ends it) at the start of `bytes`; `None` while it is incomplete.
pub(crate) fn trailers_len(bytes: &[u8]) -> Result<Option<usize>, ExchangeError> {
    let mut at = 0;
    while let Some(i) = find_crlf(&bytes[at..]) {
        at += i + 2;
        if i == 0 {
            return Ok(Some(at));
        }
    }
    if bytes.len() > MAX_HEAD {
        return Err(ExchangeError::Protocol("the trailers are too large".into()));
    }
    Ok(None)
}
