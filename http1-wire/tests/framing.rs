//! Exchanges against a raw TCP server that answers with canned bytes: every framing
//! the client reads (length, chunked, until close, 1xx, HEAD), reuse, and each error,
//! for both readers: the whole answer, and the answer read in place.

use std::time::Duration;

use http1_wire::{AnswerRules, Buffers, Connection, ExchangeError};
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

/// Answers of alternating sizes on one connection, every body kept to the end: the
/// room made for each next answer (as large as the recent ones) never touches a body
/// handed out before, and a large answer after small ones, or a small one after large
/// ones, is read whole.
#[tokio::test]
async fn bodies_of_alternating_sizes_stay_whole_while_held() {
    let sizes = [
        100usize, 90_000, 700, 200_000, 5, 90_000, 12_000, 0, 300_000,
    ];
    let bodies: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| (0..n).map(|j| b'a' + ((i * 7 + j) % 26) as u8).collect())
        .collect();
    let answers = bodies
        .iter()
        .map(|body| {
            let mut answer =
                format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len()).into_bytes();
            answer.extend_from_slice(body);
            &*Box::leak(answer.into_boxed_slice())
        })
        .collect();
    let addr = serve(answers, false).await;
    let mut c = Connection::open(addr).await.unwrap();
    let rules = AnswerRules {
        max_body: 1 << 20,
        head_request: false,
    };
    let mut held = Vec::new();
    for _ in &bodies {
        let a = c
            .exchange(&REQUEST, soon(), rules, |_, _| {})
            .await
            .unwrap();
        assert_eq!((a.status, a.reusable), (200, true));
        held.push(a.body);
    }
    for (i, (got, want)) in held.iter().zip(&bodies).enumerate() {
        assert!(
            got[..] == want[..],
            "body {i} ({} bytes) changed",
            want.len()
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

/// [`Connection::exchange_in_place`]'s answer and body, as the last exchange left them.
async fn in_place(
    c: &mut Connection,
    buffers: &Buffers,
    rules: AnswerRules,
) -> Result<(u16, Vec<u8>, bool), ExchangeError> {
    let a = c
        .exchange_in_place(&REQUEST, soon(), rules, buffers, |_, _| {})
        .await?;
    Ok((a.status, c.body().to_vec(), a.reusable))
}

#[tokio::test]
async fn in_place_reads_each_framing_and_reuses_the_connection() {
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
    let buffers = Buffers::new();
    let mut c = Connection::open(addr).await.unwrap();
    let mut seen = Vec::new();
    let a = c
        .exchange_in_place(&REQUEST, soon(), RULES, &buffers, |n, v| {
            seen.push((n.to_string(), v.to_vec()))
        })
        .await
        .unwrap();
    assert_eq!((a.status, c.body(), a.reusable), (200, &b"hello"[..], true));
    assert!(seen.contains(&("x-seen".to_string(), b"yes".to_vec())));
    // Released, the body is gone; the buffer serves the next answer.
    c.release(&buffers);
    assert_eq!(c.body(), b"");
    for (status, body, reusable) in [
        (201, &b"abcde"[..], true),
        (204, &b""[..], true),
        (200, &b"ok"[..], false),
    ] {
        let a = in_place(&mut c, &buffers, RULES).await.unwrap();
        assert_eq!(a, (status, body.to_vec(), reusable));
    }
}

#[tokio::test]
async fn in_place_joins_a_large_chunked_body_and_reads_a_large_length() {
    // 300 KB in chunks of 1 to 4099 bytes (sizes that straddle every read), then the
    // same bytes by length, on one connection: the buffer grows, then serves both.
    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let mut chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    let (mut at, mut size) = (0, 1);
    while at < body.len() {
        let n = size.min(body.len() - at);
        chunked.extend_from_slice(format!("{n:x}\r\n").as_bytes());
        chunked.extend_from_slice(&body[at..at + n]);
        chunked.extend_from_slice(b"\r\n");
        at += n;
        size = size * 7 % 4099 + 1;
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let mut length =
        format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len()).into_bytes();
    length.extend_from_slice(&body);
    let answers: Vec<&'static [u8]> = vec![chunked.leak(), length.leak()];
    let addr = serve(answers, false).await;
    let buffers = Buffers::new();
    let mut c = Connection::open(addr).await.unwrap();
    let rules = AnswerRules {
        max_body: 1 << 20,
        head_request: false,
    };
    for _ in 0..2 {
        let (status, got, reusable) = in_place(&mut c, &buffers, rules).await.unwrap();
        assert_eq!((status, got.len(), reusable), (200, body.len(), true));
        assert!(got == body, "the body differs");
        c.release(&buffers);
    }
}

#[tokio::test]
async fn in_place_until_close_and_a_head_answer() {
    let addr = serve(
        vec![b"HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\n"],
        false,
    )
    .await;
    let buffers = Buffers::new();
    let mut c = Connection::open(addr).await.unwrap();
    let head = AnswerRules {
        head_request: true,
        ..RULES
    };
    let a = in_place(&mut c, &buffers, head).await.unwrap();
    assert_eq!(a, (200, Vec::new(), true));

    let addr = serve(vec![b"HTTP/1.0 200 OK\r\n\r\nuntil the end"], true).await;
    let mut c = Connection::open(addr).await.unwrap();
    let a = in_place(&mut c, &buffers, RULES).await.unwrap();
    assert_eq!(a, (200, b"until the end".to_vec(), false));
}

/// One in-place exchange with a fresh server that answers `answer` (then closes when
/// `close_after`), before `deadline`.
async fn once_in_place(
    answer: Option<&'static [u8]>,
    close_after: bool,
    deadline: Instant,
    rules: AnswerRules,
) -> Result<(u16, Vec<u8>, bool), ExchangeError> {
    let addr = serve(answer.into_iter().collect(), close_after).await;
    let buffers = Buffers::new();
    let mut c = Connection::open(addr).await.unwrap();
    let a = c
        .exchange_in_place(&REQUEST, deadline, rules, &buffers, |_, _| {})
        .await;
    // A failed exchange leaves no body behind.
    if a.is_err() {
        assert_eq!(c.body(), b"");
    }
    Ok((a?.status, c.body().to_vec(), false))
}

#[tokio::test]
async fn in_place_errors_say_what_went_wrong() {
    let unlimited = AnswerRules {
        max_body: usize::MAX,
        ..RULES
    };
    for (answer, rules) in [
        (
            &b"HTTP/1.1 200 OK\r\ncontent-length: 5000\r\n\r\n"[..],
            RULES,
        ),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nfffff\r\n",
            RULES,
        ),
        // Within the limit, but more than memory holds, or than a usize counts past
        // the head: too large, not an abort or an overflow.
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 1152921504606846976\r\n\r\n",
            unlimited,
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 18446744073709551615\r\n\r\n",
            unlimited,
        ),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nfffffffffffffff0\r\n",
            unlimited,
        ),
    ] {
        let e = once_in_place(Some(answer), false, soon(), rules).await;
        assert!(matches!(e, Err(ExchangeError::TooLarge)), "{e:?}");
    }
    let e = once_in_place(Some(b"SSH-2.0-nope\r\n\r\n"), false, soon(), RULES).await;
    assert!(matches!(e, Err(ExchangeError::Protocol(_))), "{e:?}");
    let bad_chunk = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n";
    let e = once_in_place(Some(bad_chunk), false, soon(), RULES).await;
    assert!(matches!(e, Err(ExchangeError::Protocol(_))), "{e:?}");
    let e = once_in_place(None, true, soon(), RULES).await;
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
    let cut = b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nhal";
    let e = once_in_place(Some(cut), true, soon(), RULES).await;
    assert!(
        matches!(e, Err(ExchangeError::Io { answered: true, .. })),
        "{e:?}"
    );
    let e = once_in_place(
        None,
        false,
        Instant::now() + Duration::from_millis(50),
        RULES,
    )
    .await;
    assert!(matches!(e, Err(ExchangeError::Timeout)), "{e:?}");
}
