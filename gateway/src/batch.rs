//! Entity batching: one `_entities` request per subgraph and selection per level.
//!
//! async-graphql resolves sibling fields and list items concurrently inside one task:
//! in a single pass it polls every item's resolver once. The first resolver to ask for
//! an entity opens a [`Batch`] and becomes its leader; it yields once, so that the rest
//! of the pass can join the batch, then seals it and sends one request for all the
//! representations collected (duplicates collapse to one). Followers wait for the
//! result.
//!
//! A leader can be dropped mid-way (async-graphql drops the remaining futures of a list
//! when a non-null error bubbles up). Its drop guard marks the batch abandoned and
//! wakes the followers; the first follower to see that takes over and sends the
//! request itself, so no follower is ever left waiting on a fetch nobody runs.

use std::collections::HashMap;
use std::pin::pin;
use std::sync::{Arc, Mutex};

use async_graphql_value::ConstValue;
use reqwest::header::HeaderValue;
use tokio::sync::Notify;

use crate::supergraph::SubgraphId;
use crate::upstream::{
    Fetch, FetchError, FetchKind, FetchRequest, PathItem, UpstreamError, UpstreamResponse,
};

/// Split an `_entities` response into one response per representation: the entity as
/// `data`, and its errors with paths relative to it (`["_entities", i, …]` → `[…]`;
/// errors without a path go to every entity).
pub fn split_entities(response: &UpstreamResponse, count: usize) -> Vec<Arc<UpstreamResponse>> {
    let mut entities = match &response.data {
        Some(ConstValue::Object(data)) => match data.get("_entities") {
            Some(ConstValue::List(items)) => items.clone(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    };
    entities.resize(count, ConstValue::Null);
    let mut split: Vec<UpstreamResponse> = entities
        .into_iter()
        .map(|data| UpstreamResponse {
            data: Some(data),
            errors: Vec::new(),
        })
        .collect();
    for error in &response.errors {
        match error.path.as_slice() {
            [PathItem::Key(k), PathItem::Index(i), rest @ ..] if k == "_entities" => {
                if let Some(entity) = split.get_mut(*i) {
                    entity.errors.push(UpstreamError {
                        message: error.message.clone(),
                        path: rest.to_vec(),
                    });
                }
            }
            _ => {
                for entity in &mut split {
                    entity.errors.push(UpstreamError {
                        message: error.message.clone(),
                        path: Vec::new(),
                    });
                }
            }
        }
    }
    split.into_iter().map(Arc::new).collect()
}

type Outcome = Result<Arc<Vec<Arc<UpstreamResponse>>>, FetchError>;

enum Phase {
    Open,
    Sending,
    Abandoned,
    Done(Outcome),
}

struct BatchState {
    representations: Vec<ConstValue>,
    index: HashMap<String, usize>,
    phase: Phase,
}

struct Batch {
    subgraph: SubgraphId,
    type_name: String,
    selection: Arc<str>,
    state: Mutex<BatchState>,
    changed: Notify,
}

type BatchKey = (SubgraphId, Arc<str>);

/// The batches of one client request.
#[derive(Default)]
pub struct EntityBatcher {
    open: Mutex<HashMap<BatchKey, Arc<Batch>>>,
}

/// Marks the batch abandoned if its sender is dropped before the answer is in.
struct SenderGuard<'a> {
    batch: &'a Batch,
    armed: bool,
}

impl Drop for SenderGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            let mut state = lock(&self.batch.state);
            if !matches!(state.phase, Phase::Done(_)) {
                state.phase = Phase::Abandoned;
            }
            drop(state);
            self.batch.changed.notify_waiters();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl EntityBatcher {
    /// Resolve one entity: `representation` of `type_name`, asking `subgraph` for
    /// `selection` (`... on T { … }`). Returns this entity's share of the batch answer.
    pub async fn load(
        &self,
        fetch: &dyn Fetch,
        subgraph: SubgraphId,
        type_name: &str,
        selection: &Arc<str>,
        representation: ConstValue,
        authorization: Option<&HeaderValue>,
    ) -> Result<Arc<UpstreamResponse>, FetchError> {
        let (batch, index, leader) = self.join(subgraph, type_name, selection, representation);
        if leader {
            let mut guard = SenderGuard {
                batch: &batch,
                armed: true,
            };
            // Let the rest of this pass (sibling items, sibling fields) join the batch.
            tokio::task::yield_now().await;
            self.send(&batch, fetch, authorization).await;
            guard.armed = false;
        }
        loop {
            let mut changed = pin!(batch.changed.notified());
            changed.as_mut().enable();
            let take_over = {
                let mut state = lock(&batch.state);
                match &state.phase {
                    Phase::Done(outcome) => {
                        return outcome.clone().map(|entities| entities[index].clone());
                    }
                    Phase::Abandoned => {
                        state.phase = Phase::Open;
                        true
                    }
                    Phase::Open | Phase::Sending => false,
                }
            };
            if take_over {
                let mut guard = SenderGuard {
                    batch: &batch,
                    armed: true,
                };
                self.send(&batch, fetch, authorization).await;
                guard.armed = false;
                continue;
            }
            changed.await;
        }
    }

    fn join(
        &self,
        subgraph: SubgraphId,
        type_name: &str,
        selection: &Arc<str>,
        representation: ConstValue,
    ) -> (Arc<Batch>, usize, bool) {
        let mut open = lock(&self.open);
        let key = (subgraph, selection.clone());
        let batch = open
            .entry(key)
            .or_insert_with(|| {
                Arc::new(Batch {
                    subgraph,
                    type_name: type_name.to_string(),
                    selection: selection.clone(),
                    state: Mutex::new(BatchState {
                        representations: Vec::new(),
                        index: HashMap::new(),
                        phase: Phase::Open,
                    }),
                    changed: Notify::new(),
                })
            })
            .clone();
        let mut state = lock(&batch.state);
        let leader = state.representations.is_empty();
        let id = representation.to_string();
        let index = match state.index.get(&id) {
            Some(&i) => i,
            None => {
                let i = state.representations.len();
                state.representations.push(representation);
                state.index.insert(id, i);
                i
            }
        };
        drop(state);
        (batch, index, leader)
    }

    /// Seal `batch` (later loads open a new one) and send it.
    async fn send(
        &self,
        batch: &Arc<Batch>,
        fetch: &dyn Fetch,
        authorization: Option<&HeaderValue>,
    ) {
        {
            let mut open = lock(&self.open);
            let key = (batch.subgraph, batch.selection.clone());
            if open.get(&key).is_some_and(|b| Arc::ptr_eq(b, batch)) {
                open.remove(&key);
            }
        }
        let representations = {
            let mut state = lock(&batch.state);
            state.phase = Phase::Sending;
            state.representations.clone()
        };
        let query = format!(
            "query($representations:[_Any!]!){{_entities(representations:$representations){{{}}}}}",
            batch.selection
        );
        let count = representations.len();
        let variables = serde_json::json!({ "representations": representations });
        let request = FetchRequest {
            subgraph: batch.subgraph,
            kind: FetchKind::Entities {
                type_name: &batch.type_name,
            },
            query,
            variables: Some(variables),
            authorization,
        };
        let outcome = fetch
            .fetch(request)
            .await
            .map(|response| Arc::new(split_entities(&response, count)));
        lock(&batch.state).phase = Phase::Done(outcome);
        batch.changed.notify_waiters();
    }
}
