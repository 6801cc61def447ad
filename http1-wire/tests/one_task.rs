//! Answers read in place when the task's cooperative budget is spent, as it is when one
//! task drives every connection of a loadgen thread and many answers are there at once.
//! The read must then yield to the runtime; a reader that turned the budget's refusal
//! into a retry would spin the thread for good, and every connection on it with it.

use std::future::Future;
use std::sync::mpsc;
use std::task::Poll;
use std::time::Duration;

use http1_wire::{AnswerRules, Buffers, Connection};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::Instant;

const REQUEST: [&[u8]; 2] = [
    b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 4\r\n\r\n",
    b"BODY",
];
const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello";

/// A server that answers each request on one connection with [`ANSWER`].
async fn serve() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = vec![0u8; REQUEST.iter().map(|p| p.len()).sum()];
        while socket.read_exact(&mut request).await.is_ok() {
            socket.write_all(ANSWER).await.unwrap();
        }
    });
    addr
}

/// One exchange whose answer is already in the socket when it is polled with the
/// task's budget spent: it must come back `Pending` (the runtime then polls the task
/// again with a fresh budget) and then read the answer.
async fn an_answer_read_with_the_budget_spent() {
    let addr = serve().await;
    let buffers = Buffers::new();
    let rules = AnswerRules {
        max_body: 1024,
        head_request: false,
    };
    let mut c = Connection::open(addr).await.unwrap();
    for _ in 0..3 {
        let deadline = Instant::now() + Duration::from_secs(30);
        let answer = {
            let mut exchange =
                std::pin::pin!(c.exchange_in_place(&REQUEST, deadline, rules, &buffers, |_, _| {}));
            // First poll: the request goes out; the answer is not there yet.
            let first = std::future::poll_fn(|cx| Poll::Ready(exchange.as_mut().poll(cx))).await;
            assert!(first.is_pending(), "answered before it could arrive");
            tokio::time::sleep(Duration::from_millis(50)).await;
            // Now the answer is there. Spend the budget, then poll the exchange in the
            // same poll of the task: once only, so the next poll has a fresh budget.
            let mut spent = false;
            std::future::poll_fn(|cx| {
                if !spent {
                    spent = true;
                    while std::pin::pin!(tokio::task::consume_budget())
                        .poll(cx)
                        .is_ready()
                    {}
                }
                exchange.as_mut().poll(cx)
            })
            .await
            .unwrap()
        };
        assert_eq!((answer.status, answer.reusable), (200, true));
        assert_eq!(c.body(), b"hello");
        c.release(&buffers);
    }
}

#[test]
fn an_answer_read_with_the_tasks_budget_spent_yields_then_arrives() {
    let (tx, rx) = mpsc::channel();
    // On a thread of its own: a task that spins never lets its runtime's timers fire,
    // so the test waits for it from outside.
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(an_answer_read_with_the_budget_spent());
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("no answer: the read spun on the spent budget instead of yielding");
}
