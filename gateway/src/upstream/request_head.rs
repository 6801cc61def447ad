//! The request a subgraph is sent, on the wire.
//!
//! The gateway only ever POSTs a JSON body, so the head is a template made once per
//! subgraph (`POST /path HTTP/1.1`, `host`, `content-type`, `accept`), completed per
//! request with the body's length and the caller's `authorization`. The exchange
//! itself is [`http1_wire::Connection::exchange`]: one vectored write of these parts
//! and the body, then the answer read whole.

use bytes::Bytes;
use hyper::header::HeaderValue;

/// The constant part of every request to one subgraph.
pub struct RequestHead {
    /// `POST /path HTTP/1.1\r\nhost: …\r\ncontent-type: application/json\r\n…content-length: `
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

    /// The constant prefix, then the head's variable part for this request (the
    /// body's length, the caller's authorization, the blank line); the body follows.
    pub fn complete(
        &self,
        body_len: usize,
        authorization: Option<&HeaderValue>,
    ) -> (&[u8], Vec<u8>) {
        let mut tail = itoa::Buffer::new().format(body_len).as_bytes().to_vec();
        if let Some(auth) = authorization {
            tail.extend_from_slice(b"\r\nauthorization: ");
            tail.extend_from_slice(auth.as_bytes());
        }
        tail.extend_from_slice(b"\r\n\r\n");
        (&self.prefix, tail)
    }
}
