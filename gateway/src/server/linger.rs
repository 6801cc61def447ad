//! A lingering close, as nginx does it: a connection closed while its client is still
//! sending is read and discarded for a while before it is closed for good.
//!
//! Closing a TCP socket whose receive buffer holds unread bytes makes the kernel send
//! a reset, and a reset can destroy the answer the client has not read yet. That is
//! what a client meets when it writes a whole oversized body before reading: the
//! gateway answers `413` after the first `--max-body-bytes`, stops reading, closes,
//! and the client's next write (or its read) fails with "connection reset" instead of
//! showing the `413`. The same happens to a connection refused over the connection
//! limit with a `503` written before its request was read.
//!
//! [`Lingering`] wraps a connection's stream. When it is dropped with unread bytes
//! waiting (the one case where closing would reset), its socket is handed to a
//! lingering task that half-closes it (our side is done), then reads and throws away
//! what arrives until the client closes, or [`LINGER_IDLE`] passes without a byte, or
//! [`LINGER_TOTAL`] passes, or [`LINGER_BYTES`] were thrown away. At most
//! [`MAX_LINGERING`] sockets linger at once; past that a socket is closed at once. A
//! connection closed cleanly (nothing unread) costs one non-blocking peek in `drop`.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// Longest wait for the next byte while lingering.
pub const LINGER_IDLE: Duration = Duration::from_secs(2);
/// Longest a socket lingers in all.
pub const LINGER_TOTAL: Duration = Duration::from_secs(10);
/// Most bytes thrown away per socket.
pub const LINGER_BYTES: u64 = 64 << 20;
/// Most sockets lingering at once.
pub const MAX_LINGERING: usize = 256;

/// How many sockets linger now, shared by every connection of a server.
#[derive(Default, Debug)]
pub struct LingerCount(AtomicUsize);

impl LingerCount {
    pub fn now(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// A connection's stream that lingers when dropped with unread input.
pub struct Lingering {
    stream: Option<TcpStream>,
    count: Arc<LingerCount>,
}

impl Lingering {
    pub fn new(stream: TcpStream, count: Arc<LingerCount>) -> Lingering {
        Lingering {
            stream: Some(stream),
            count,
        }
    }

    fn stream(&mut self) -> Pin<&mut TcpStream> {
        Pin::new(self.stream.as_mut().expect("present until dropped"))
    }
}

impl AsyncRead for Lingering {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.get_mut().stream().poll_read(cx, buf)
    }
}

impl AsyncWrite for Lingering {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().stream().poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().stream().poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().stream().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().stream().poll_shutdown(cx)
    }
}

impl Drop for Lingering {
    fn drop(&mut self) {
        let Some(stream) = self.stream.take() else {
            return;
        };
        // Outside a runtime (it is shutting down) there is nowhere to linger.
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        // A peek at the socket itself (tokio's readiness may not have seen the bytes).
        let Ok(stream) = stream.into_std() else {
            return;
        };
        let mut probe = [0u8; 1];
        // Nothing unread (or the client is gone): a plain close resets nothing.
        if !matches!(stream.peek(&mut probe), Ok(n) if n > 0) {
            return;
        }
        if let Ok(stream) = TcpStream::from_std(stream) {
            linger(stream, self.count.clone());
        }
    }
}

/// Half-close `stream` and read it dry within the limits, from a task of its own (at
/// once if too many already linger, or outside a runtime).
pub fn linger(mut stream: TcpStream, count: Arc<LingerCount>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    if count.0.fetch_add(1, Ordering::AcqRel) >= MAX_LINGERING {
        count.0.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    runtime.spawn(async move {
        let _ = stream.shutdown().await;
        let drain = async {
            let mut buffer = vec![0u8; 64 * 1024];
            let mut thrown = 0u64;
            while thrown < LINGER_BYTES {
                match tokio::time::timeout(LINGER_IDLE, stream.read(&mut buffer)).await {
                    Ok(Ok(n)) if n > 0 => thrown += n as u64,
                    _ => break,
                }
            }
        };
        let _ = tokio::time::timeout(LINGER_TOTAL, drain).await;
        count.0.fetch_sub(1, Ordering::AcqRel);
    });
}
