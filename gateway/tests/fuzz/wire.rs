//! The harness's HTTP client: one kept-alive connection on raw TCP
//! ([`http1_wire`]), so that a case without an answer can be told apart by where it
//! happened.
//!
//! A request that gets no byte of an answer on a connection that has carried an
//! answer before met the keep-alive race every HTTP/1.1 client meets: the gateway
//! closes a connection left idle for its header read timeout (500 ms in the test rig),
//! and a request sent at that moment finds it closed. Such a request is sent once
//! more on a new connection, as HTTP clients do (RFC 9112, 9.3.1), and counted with
//! how long the connection had been idle from the client's side. A request that gets
//! no answer on a *new* connection has no such excuse, and fails its case.
//!
//! The client drops connections idle for [`IDLE_LIMIT`], well before the gateway's
//! 500 ms, so a race needs the client to stall for the difference between taking the
//! connection and writing on it.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http1_wire::{AnswerRules, Connection, ExchangeError};
use tokio::sync::Mutex;
use tokio::time::Instant;

/// Connections idle this long are not reused.
pub const IDLE_LIMIT: Duration = Duration::from_millis(200);

/// Keep-alive races met, the longest client-side idle time before one, and what the
/// exchange before each was (the first few).
#[derive(Debug, Default, Clone)]
pub struct Races {
    pub count: usize,
    pub longest_idle: Duration,
    pub after: Vec<String>,
}

pub struct WireClient {
    addr: SocketAddr,
    head: String,
    idle: Mutex<Option<Connection>>,
    races: std::sync::Mutex<Races>,
    /// The last exchange that was answered: its status, sizes and `connection` header.
    last: std::sync::Mutex<String>,
}

impl WireClient {
    pub fn new(addr: SocketAddr) -> WireClient {
        WireClient {
            addr,
            head: format!(
                "POST /graphql HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: "
            ),
            idle: Mutex::new(None),
            races: Default::default(),
            last: Default::default(),
        }
    }

    pub fn races(&self) -> Races {
        self.races.lock().unwrap().clone()
    }

    /// POST `body` to /graphql: the status and body, or why there is none.
    pub async fn post(&self, body: &[u8], deadline: Instant) -> Result<(u16, Bytes), String> {
        let mut slot = self.idle.lock().await;
        let now = Instant::now();
        let mut reused = None;
        let mut connection = match slot.take() {
            Some(c) if c.idle_for(now) < IDLE_LIMIT => {
                reused = Some(c.idle_for(now));
                c
            }
            _ => self.open().await?,
        };
        let head = format!("{}{}\r\n\r\n", self.head, body.len());
        let rules = AnswerRules {
            max_body: 64 << 20,
            head_request: false,
        };
        loop {
            let mut connection_header = String::new();
            let sent = connection
                .exchange(&[head.as_bytes(), body], deadline, rules, |name, value| {
                    if name.eq_ignore_ascii_case("connection") {
                        connection_header = String::from_utf8_lossy(value).into_owned();
                    }
                })
                .await;
            match sent {
                Ok(answer) => {
                    *self.last.lock().unwrap() = format!(
                        "status {}, request {} bytes, answer {} bytes, connection: {connection_header:?}, reusable {}",
                        answer.status,
                        body.len(),
                        answer.body.len(),
                        answer.reusable
                    );
                    if answer.reusable {
                        connection.set_idle(Instant::now());
                        *slot = Some(connection);
                    }
                    return Ok((answer.status, answer.body));
                }
                Err(ExchangeError::Io {
                    answered: false, ..
                }) if reused.is_some() => {
                    let idle = reused.take().unwrap_or_default();
                    {
                        let last = self.last.lock().unwrap().clone();
                        let mut races = self.races.lock().unwrap();
                        races.count += 1;
                        races.longest_idle = races.longest_idle.max(idle);
                        if races.after.len() < 8 {
                            races.after.push(format!("idle {idle:?} after: {last}"));
                        }
                    }
                    connection = self.open().await?;
                }
                Err(ExchangeError::Timeout) => return Err("no answer in time".into()),
                Err(e) => {
                    let on = if reused.is_some() {
                        "a reused connection"
                    } else {
                        "a new connection"
                    };
                    return Err(format!("no answer on {on}: {e:?}"));
                }
            }
        }
    }

    async fn open(&self) -> Result<Connection, String> {
        Connection::open(self.addr)
            .await
            .map_err(|e| format!("connect: {e}"))
    }
}
