//! The admin listener (`--admin-listen ADDR`): `POST /invalidate` and `GET /health`,
//! on an address of their own. The public port never serves them, so a deployment
//! can keep this one on a private network.
//!
//! `POST /invalidate` takes a JSON body naming what changed
//! ([`crate::caching::invalidation`]) and answers `200` with what each cache level
//! dropped (`{"dropped": {"resolver": 3, "response": 1}}`, with `"edge": "purged"`
//! under `--edge-purge`), `400` with a message for a body it cannot read, `503` when a
//! level could not be reached (Redis down, the edge away: what could be dropped was).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use crate::caching::invalidation::{invalidate, Target};
use crate::pipeline::App;

/// The admin routes.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/invalidate", post(invalidate_post))
        .route("/health", get(|| async { "ok" }))
        .with_state(app)
}

/// Most bytes of an invalidation's body.
const MOST_BODY_BYTES: usize = 1 << 20;

async fn invalidate_post(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let json = |status: StatusCode, body: String| {
        (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
    };
    let message =
        |status, text: String| json(status, serde_json::json!({ "error": text }).to_string());
    if body.len() > MOST_BODY_BYTES {
        let text = format!("the body is larger than {MOST_BODY_BYTES} bytes");
        return message(StatusCode::PAYLOAD_TOO_LARGE, text);
    }
    let target = match Target::parse(&body) {
        Ok(target) => target,
        Err(e) => return message(StatusCode::BAD_REQUEST, e),
    };
    let resolver = app.executor.cache.as_deref();
    let responses = app.requests.as_deref();
    match invalidate(resolver, responses, app.edge.as_deref(), &target).await {
        Ok(dropped) => json(StatusCode::OK, dropped.to_json()),
        Err(e) => message(StatusCode::SERVICE_UNAVAILABLE, e),
    }
}
