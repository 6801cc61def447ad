//! Exchanges against a raw TCP server that answers with canned bytes: every framing
//! the client reads (length, chunked, until close, 1xx, HEAD), reuse, and each error.

use std::time::Duration;

use http1_wire::{AnswerRules, Connection, ExchangeError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::Instant;

const RULES: AnswerRules = AnswerRules {
    max_body: 1024,
    head_request: false,
};

/// A server that, for each request it reads (up to the blank line and `body_len`
/// bytes), writes the next of `answers` and, after the last, keeps the connection
/// open without writing (or closes it when `close_after`).
async fn serve(answers: Vec<&'static [u8]>, close_after: bool) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        for answer in answers {
            let mut seen = Vec::new();
            let mut byte = [0u8; 1];
            while !seen.ends_with(b"\r\n\r\nBODY") {
                if socket.read(&mut byte).await.unwrap_or(0) == 0 {
                    return;
                }
                seen.push(byte[0]);
            }
            socket.write_all(answer).await.unwrap();
        }
        if close_after {
            drop(socket);
        } else {
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    });
    addr
}

const REQUEST: [&[u8]; 2] = [
    b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 4\r\n\r\n",
    b"BODY",
];

/// The deadline of an exchange that is answered: reached only when something is wrong,
/// so generous enough for a loaded machine.
fn soon() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

#[tokio::test]
async fn reads_each_framing_and_reuses_the_connection() {
    let addr = serve(
        vec![
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nx-seen: yes\r\n\r\nhello",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\ntransfer-encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\ntrailer: t\r\n\r\n",
            b"HTTP/1.1 204 No Content\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok",
        ],
        false,
    )
    .await;
    let mut c = Connection::open(addr).await.unwrap();
    let mut seen = Vec::new();
    let a = c
        .exchange(&REQUEST, soon(), RULES, |n, v| {
            seen.push((n.to_string(), v.to_vec()))
        })
        .await
        .unwrap();
    assert_eq!(
        (a.status, &a.body[..], a.reusable),
        (200, &b"hello"[..], true)
    );
    assert!(seen.contains(&("x-seen".to_string(), b"yes".to_vec())));
    // The same connection carries each next exchange: chunked after a 100, a 204, and
    // a last answer that closes.
    for (status, body, reusable) in [
        (201, &b"abcde"[..], true),
        (204, &b""[..], true),
        (200, &b"ok"[..], false),
    ] {
        let a = c
            .exchange(&REQUEST, soon(), RULES, |_, _| {})
            .await
            .unwrap();
        assert_eq!(
            (a.status, &a.body[..], a.reusable),
            (status, body, reusable)
        );
    }
}

#[tokio::test]
async fn a_body_until_close_and_a_head_answer() {
    let addr = serve(
        vec![b"HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\n"],
        false,
    )
    .await;
    let mut c = Connection::open(addr).await.unwrap();
    let head = AnswerRules {
        head_request: true,
        ..RULES
    };
    let a = c.exchange(&REQUEST, soon(), head, |_, _| {}).await.unwrap();
    assert_eq!((a.status, a.body.len(), a.reusable), (200, 0, true));

    let addr = serve(vec![b"HTTP/1.0 200 OK\r\n\r\nuntil the end"], true).await;
    let mut c = Connection::open(addr).await.unwrap();
    let a = c
        .exchange(&REQUEST, soon(), RULES, |_, _| {})
        .await
        .unwrap();
    assert_eq!((&a.body[..], a.reusable), (&b"until the end"[..], false));
}

/// One exchange with a fresh server that answers `answer` (then closes when
/// `close_after`), before `deadline`.
async fn once(
    answer: Option<&'static [u8]>,
    close_after: bool,
    deadline: Instant,
) -> Result<http1_wire::Answer, ExchangeError> {
    let addr = serve(answer.into_iter().collect(), close_after).await;
    let mut c = Connection::open(addr).await.unwrap();
    c.exchange(&REQUEST, deadline, RULES, |_, _| {}).await
}

#[tokio::test]
async fn errors_say_what_went_wrong() {
    // Too large, by length and by chunks.
    for answer in [
        &b"HTTP/1.1 200 OK\r\ncontent-length: 5000\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nfffff\r\n",
    ] {
        let e = once(Some(answer), false, soon()).await;
        assert!(matches!(e, Err(ExchangeError::TooLarge)), "{e:?}");
    }
    // Not HTTP.
    let e = once(Some(b"SSH-2.0-nope\r\n\r\n"), false, soon()).await;
    assert!(matches!(e, Err(ExchangeError::Protocol(_))), "{e:?}");
    // Closed before any answer: not answered, so the caller may send it again.
    let e = once(None, true, soon()).await;
    assert!(
        matches!(
            e,
            Err(ExchangeError::Io {
                answered: false,
                ..
            })
        ),
        "{e:?}"
    );
    // Closed mid-answer.
    let cut = b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nhal";
    let e = once(Some(cut), true, soon()).await;
    assert!(
        matches!(e, Err(ExchangeError::Io { answered: true, .. })),
        "{e:?}"
    );
    // No answer before the deadline.
    let e = once(None, false, Instant::now() + Duration::from_millis(50)).await;
    assert!(matches!(e, Err(ExchangeError::Timeout)), "{e:?}");
    // Bytes after the body: the answer stands, the connection is not reused.
    let extra = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokEXTRA";
    let a = once(Some(extra), false, soon()).await.unwrap();
    assert_eq!((&a.body[..], a.reusable), (&b"ok"[..], false));
}
