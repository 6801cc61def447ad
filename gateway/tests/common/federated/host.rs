//! Serving a [`Subgraph`]: an axum route over its dynamic schema on a free port, which
//! records every request, holds it as the subgraph's delay says, and rewrites the
//! answer as its tamper does.

use std::sync::Arc;

use async_graphql::dynamic::Schema;
use axum::extract::State;
use axum::Router;
use parking_lot::Mutex;
use serde_json::{json, Value as Json};

use super::schema::{Delay, Entities, Subgraph, Tamper};
use crate::common::Server;

/// async-graphql's dynamic schemas cannot answer a null item of `[_Entity]!` (an
/// entity that does not exist), so such representations are taken out of the
/// request before it runs, and their nulls put back into its answer. The
/// `_entities` fields of `query` (by response key) and the variables that carry
/// their representations.
fn entity_fields(query: &str) -> Vec<(String, String)> {
    use async_graphql_parser::types::{DocumentOperations, Selection};
    use async_graphql_value::Value;
    let Ok(doc) = async_graphql_parser::parse_query(query) else {
        return Vec::new();
    };
    let operations: Vec<_> = match &doc.operations {
        DocumentOperations::Single(op) => vec![&op.node],
        DocumentOperations::Multiple(ops) => ops.values().map(|op| &op.node).collect(),
    };
    let mut out = Vec::new();
    for op in operations {
        for item in &op.selection_set.node.items {
            if let Selection::Field(f) = &item.node {
                let f = &f.node;
                if f.name.node != "_entities" {
                    continue;
                }
                if let Some(Value::Variable(v)) = f.get_argument("representations").map(|a| &a.node)
                {
                    out.push((f.response_key().node.to_string(), v.to_string()));
                }
            }
        }
    }
    out
}

/// One request a subgraph received.
#[derive(Debug, Clone)]
pub struct Logged {
    pub query: String,
    pub variables: Json,
}

struct Host {
    schema: Schema,
    entities: Option<Entities>,
    tamper: Option<Tamper>,
    delay: Option<Delay>,
    log: Mutex<Vec<Logged>>,
}

async fn graphql(State(host): State<Arc<Host>>, body: bytes::Bytes) -> axum::Json<Json> {
    let request: Json = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return axum::Json(json!({ "errors": [{ "message": e.to_string() }] })),
    };
    let query = request["query"].as_str().unwrap_or_default().to_string();
    let mut variables = request.get("variables").cloned().unwrap_or(json!({}));
    if variables.is_null() {
        variables = json!({});
    }
    host.log.lock().push(Logged {
        query: query.clone(),
        variables: variables.clone(),
    });
    if let Some(delay) = &host.delay {
        tokio::time::sleep(delay(&query)).await;
    }
    // Representations whose entity does not exist: (response key, their indexes).
    let mut missing: Vec<(String, Vec<usize>)> = Vec::new();
    if let Some(resolve) = &host.entities {
        for (key, variable) in entity_fields(&query) {
            let Some(Json::Array(reps)) = variables.get_mut(&variable) else {
                continue;
            };
            let absent: Vec<usize> = (0..reps.len())
                .filter(|&i| resolve(&reps[i]).is_null())
                .collect();
            for &i in absent.iter().rev() {
                reps.remove(i);
            }
            missing.push((key, absent));
        }
    }
    let mut graphql_request = async_graphql::Request::new(query.clone())
        .variables(async_graphql::Variables::from_json(variables));
    if let Some(name) = request["operationName"].as_str() {
        graphql_request = graphql_request.operation_name(name);
    }
    let response = host.schema.execute(graphql_request).await;
    let mut answer = serde_json::to_value(&response).expect("a response serializes");
    for (key, absent) in missing {
        if let Some(Json::Array(items)) = answer.pointer_mut(&format!("/data/{key}")) {
            for i in absent {
                items.insert(i.min(items.len()), Json::Null);
            }
        }
    }
    if let Some(tamper) = &host.tamper {
        tamper(&query, &mut answer);
    }
    axum::Json(answer)
}

/// A served subgraph.
pub struct Running {
    pub name: &'static str,
    pub server: Server,
    host: Arc<Host>,
}

impl Running {
    /// The requests it received, in order.
    pub fn log(&self) -> Vec<Logged> {
        self.host.log.lock().clone()
    }

    pub fn requests(&self) -> usize {
        self.host.log.lock().len()
    }

    /// Forget the requests it received.
    pub fn clear_log(&self) {
        self.host.log.lock().clear();
    }
}

pub async fn serve(subgraph: Subgraph) -> Running {
    let name = subgraph.name;
    let (schema, entities, tamper, delay) = subgraph.schema();
    let host = Arc::new(Host {
        schema,
        entities,
        tamper,
        delay,
        log: Mutex::new(Vec::new()),
    });
    let router = Router::new()
        .route("/graphql", axum::routing::post(graphql))
        .with_state(host.clone());
    Running {
        name,
        server: Server::start(router).await,
        host,
    }
}
