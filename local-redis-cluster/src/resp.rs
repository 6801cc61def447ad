//! One Redis command over a fresh TCP connection, its reply parsed from RESP2.
//!
//! Blocking (std sockets), with a read and write timeout: it serves tests and the
//! runner's few questions (`CLUSTER INFO`, `CLUSTER NODES`, `CLUSTER KEYSLOT`, `DBSIZE`),
//! never a hot path.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A reply. An error reply (`-ERR …`, `-MOVED …`) is [`Reply::Error`], not an `Err`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`
    Simple(String),
    /// `-ERR …`
    Error(String),
    /// `:42`
    Int(i64),
    /// `$…` (`None`: the null bulk string).
    Bulk(Option<String>),
    /// `*…` (`None`: the null array).
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// The text of a simple or bulk string reply.
    pub fn text(&self) -> Option<&str> {
        match self {
            Reply::Simple(s) | Reply::Bulk(Some(s)) => Some(s),
            _ => None,
        }
    }

    /// The value of an integer reply.
    pub fn int(&self) -> Option<i64> {
        match self {
            Reply::Int(n) => Some(*n),
            _ => None,
        }
    }
}

/// Sends `args` to `addr` and reads the whole reply, within `timeout` per read/write.
pub fn command(addr: SocketAddr, args: &[&str], timeout: Duration) -> io::Result<Reply> {
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut request = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        request.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        request.extend_from_slice(a.as_bytes());
        request.extend_from_slice(b"\r\n");
    }
    stream.write_all(&request)?;
    let mut bytes = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        if let Some((reply, _)) = parse(&bytes)? {
            return Ok(reply);
        }
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "redis closed the connection before a whole reply",
            ));
        }
        bytes.extend_from_slice(&buf[..n]);
    }
}

/// The first reply in `bytes` and the bytes it took, once it is all there.
fn parse(bytes: &[u8]) -> io::Result<Option<(Reply, usize)>> {
    let Some(end) = bytes.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let line = String::from_utf8_lossy(&bytes[1..end]).into_owned();
    let after = end + 2;
    let number = |line: &str| {
        line.parse::<i64>().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad RESP length {line:?}"),
            )
        })
    };
    match bytes.first() {
        Some(b'+') => Ok(Some((Reply::Simple(line), after))),
        Some(b'-') => Ok(Some((Reply::Error(line), after))),
        Some(b':') => Ok(Some((Reply::Int(number(&line)?), after))),
        Some(b'$') => {
            let Ok(len) = usize::try_from(number(&line)?) else {
                return Ok(Some((Reply::Bulk(None), after)));
            };
            if bytes.len() < after + len + 2 {
                return Ok(None);
            }
            let text = String::from_utf8_lossy(&bytes[after..after + len]).into_owned();
            Ok(Some((Reply::Bulk(Some(text)), after + len + 2)))
        }
        Some(b'*') => {
            let Ok(count) = usize::try_from(number(&line)?) else {
                return Ok(Some((Reply::Array(None), after)));
            };
            let mut items = Vec::with_capacity(count.min(1024));
            let mut at = after;
            for _ in 0..count {
                let Some((item, used)) = parse(&bytes[at..])? else {
                    return Ok(None);
                };
                items.push(item);
                at += used;
            }
            Ok(Some((Reply::Array(Some(items)), at)))
        }
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unexpected RESP reply {:?}", String::from_utf8_lossy(bytes)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_parsed_once_complete() {
        assert_eq!(
            parse(b"+OK\r\n").unwrap(),
            Some((Reply::Simple("OK".into()), 5))
        );
        assert_eq!(parse(b":12\r\n").unwrap().unwrap().0, Reply::Int(12));
        assert_eq!(parse(b"$5\r\nhel").unwrap(), None);
        assert_eq!(
            parse(b"$5\r\nhello\r\n").unwrap().unwrap().0,
            Reply::Bulk(Some("hello".into()))
        );
        assert_eq!(parse(b"$-1\r\n").unwrap().unwrap().0, Reply::Bulk(None));
        assert_eq!(
            parse(b"-MOVED 12 127.0.0.1:7000\r\n").unwrap().unwrap().0,
            Reply::Error("MOVED 12 127.0.0.1:7000".into())
        );
        assert_eq!(parse(b"*2\r\n:1\r\n$1\r\n").unwrap(), None);
        assert_eq!(
            parse(b"*2\r\n:1\r\n$1\r\na\r\n").unwrap().unwrap().0,
            Reply::Array(Some(vec![Reply::Int(1), Reply::Bulk(Some("a".into()))]))
        );
        assert!(parse(b"?\r\n").is_err());
    }
}
