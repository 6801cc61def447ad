//! One-off HTTP requests the runner makes around a measurement: `/health`, `/metrics`,
//! the answer check and the profile download. One connection per request, with a
//! deadline; none of this is on the measured path.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE, HOST};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// A finished exchange.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Bytes,
}

impl Answer {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Send one request to `addr` and read the whole answer within `deadline`.
pub async fn request(
    addr: SocketAddr,
    method: Method,
    path_and_query: &str,
    headers: &[String],
    body: Option<String>,
    deadline: Duration,
) -> anyhow::Result<Answer> {
    let exchange = async {
        let stream = TcpStream::connect(addr).await?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut request = Request::builder()
            .method(method)
            .uri(path_and_query)
            .header(HOST, HeaderValue::from_str(&addr.to_string())?);
        if body.is_some() {
            request = request.header(CONTENT_TYPE, "application/json");
        }
        for h in headers {
            if let Some((name, value)) = h.split_once(':') {
                request = request.header(
                    HeaderName::from_bytes(name.trim().as_bytes())?,
                    value.trim(),
                );
            }
        }
        let request = request.body(Full::new(Bytes::from(body.unwrap_or_default())))?;
        let response = sender.send_request(request).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        driver.abort();
        Ok::<_, anyhow::Error>(Answer { status, body })
    };
    match tokio::time::timeout(deadline, exchange).await {
        Ok(result) => result,
        Err(_) => anyhow::bail!("no answer from {addr}{path_and_query} within {deadline:?}"),
    }
}

/// `GET path` with a deadline.
pub async fn get(addr: SocketAddr, path: &str, deadline: Duration) -> anyhow::Result<Answer> {
    request(addr, Method::GET, path, &[], None, deadline).await
}
