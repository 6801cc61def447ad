//! Entity batching: one request per subgraph per level, whatever the selections.
//!
//! async-graphql resolves sibling fields and list items concurrently inside one task:
//! in a single pass it polls every item's resolver once. The first resolver to ask for
//! an entity from a subgraph opens a [`Batch`] and becomes its leader; it yields once,
//! so that the rest of the pass can join the batch, then seals it and sends one request
//! for all the representations collected (duplicates collapse to one). Representations
//! that arrive in the same pass with different selections go in the same request as
//! separate aliased `_entities` fields. Followers wait for the result.
//!
//! async-graphql's dynamic schema resolves list items concurrently but the fields of a
//! nested object one after another, so two sibling fields that each need an entity
//! fetch (`a: author { name } b: author { n: name }`) cost one request each, for all
//! the list's items together: never one per parent.
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

/// Split the answer to the `alias: _entities(...)` field of a batch into one response
/// per representation: the entity as `data`, and its errors with paths relative to it
/// (`[alias, i, …]` → `[…]`; errors without such a path go to every entity).
pub fn split_entities(
    response: &UpstreamResponse,
    alias: &str,
    count: usize,
) -> Vec<Arc<UpstreamResponse>> {
    let mut entities = match &response.data {
        Some(ConstValue::Object(data)) => match data.get(alias) {
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
            [PathItem::Key(k), PathItem::Index(i), rest @ ..] if k == alias => {
                if let Some(entity) = split.get_mut(*i) {
                    entity.errors.push(UpstreamError {
                        message: error.message.clone(),
                        path: rest.to_vec(),
                    });
                }
            }
            [PathItem::Key(k), ..] if k != alias => {} // another group's
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

/// Per group, per representation: each entity's share of the answer.
type Outcome = Result<Arc<Vec<Vec<Arc<UpstreamResponse>>>>, FetchError>;

enum Phase {
    Open,
    Sending,
    Abandoned,
    Done(Outcome),
}

/// The representations that share one selection: one `_entities` field of the request.
struct Group {
    type_name: String,
    selection: Arc<str>,
    representations: Vec<ConstValue>,
    index: HashMap<String, usize>,
}

struct BatchState {
    groups: Vec<Group>,
    /// How many loads have joined, to tell when a pass brought no more.
    joins: usize,
    phase: Phase,
}

/// One request to one subgraph: every group collected in one pass.
struct Batch {
    subgraph: SubgraphId,
    state: Mutex<BatchState>,
    changed: Notify,
}

/// The batches of one client request.
#[derive(Default)]
pub struct EntityBatcher {
    open: Mutex<HashMap<SubgraphId, Arc<Batch>>>,
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
        let (batch, group, index, leader) =
            self.join(subgraph, type_name, selection, representation);
        if leader {
            let mut guard = SenderGuard {
                batch: &batch,
                armed: true,
            };
            // Let the rest of this pass (sibling items, sibling fields) join the batch.
            // async-graphql's containers may stop a pass early once two children have
            // yielded, so keep yielding while others are still joining (bounded).
            let mut seen = lock(&batch.state).joins;
            for _ in 0..16 {
                tokio::task::yield_now().await;
                let joins = lock(&batch.state).joins;
                if joins == seen {
                    break;
                }
                seen = joins;
            }
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
                        return outcome.clone().map(|groups| groups[group][index].clone());
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

    /// Add a representation to the open batch for `subgraph`; returns the batch, the
    /// group and index of the representation, and whether this caller leads.
    fn join(
        &self,
        subgraph: SubgraphId,
        type_name: &str,
        selection: &Arc<str>,
        representation: ConstValue,
    ) -> (Arc<Batch>, usize, usize, bool) {
        let mut open = lock(&self.open);
        let batch = open
            .entry(subgraph)
            .or_insert_with(|| {
                Arc::new(Batch {
                    subgraph,
                    state: Mutex::new(BatchState {
                        groups: Vec::new(),
                        joins: 0,
                        phase: Phase::Open,
                    }),
                    changed: Notify::new(),
                })
            })
            .clone();
        let mut state = lock(&batch.state);
        let leader = state.groups.is_empty();
        state.joins += 1;
        let group = match state.groups.iter().position(|g| g.selection == *selection) {
            Some(g) => g,
            None => {
                state.groups.push(Group {
                    type_name: type_name.to_string(),
                    selection: selection.clone(),
                    representations: Vec::new(),
                    index: HashMap::new(),
                });
                state.groups.len() - 1
            }
        };
        let group_state = &mut state.groups[group];
        let id = representation.to_string();
        let index = match group_state.index.get(&id) {
            Some(&i) => i,
            None => {
                let i = group_state.representations.len();
                group_state.representations.push(representation);
                group_state.index.insert(id, i);
                i
            }
        };
        drop(state);
        (batch, group, index, leader)
    }

    /// Seal `batch` (later loads open a new one) and send it: one `_entities` field
    /// per group, aliased `e0`, `e1`, …, each with its own representations variable.
    async fn send(
        &self,
        batch: &Arc<Batch>,
        fetch: &dyn Fetch,
        authorization: Option<&HeaderValue>,
    ) {
        {
            let mut open = lock(&self.open);
            if open
                .get(&batch.subgraph)
                .is_some_and(|b| Arc::ptr_eq(b, batch))
            {
                open.remove(&batch.subgraph);
            }
        }
        let (groups, type_name) = {
            let mut state = lock(&batch.state);
            state.phase = Phase::Sending;
            let groups: Vec<(Arc<str>, Vec<ConstValue>)> = state
                .groups
                .iter()
                .map(|g| (g.selection.clone(), g.representations.clone()))
                .collect();
            let type_name = state
                .groups
                .first()
                .map(|g| g.type_name.clone())
                .unwrap_or_default();
            (groups, type_name)
        };
        let mut query = String::from("query(");
        for i in 0..groups.len() {
            if i > 0 {
                query.push(',');
            }
            query.push_str(&format!("$r{i}:[_Any!]!"));
        }
        query.push_str("){");
        let mut variables = serde_json::Map::new();
        let mut counts = Vec::with_capacity(groups.len());
        for (i, (selection, representations)) in groups.into_iter().enumerate() {
            query.push_str(&format!(
                "e{i}:_entities(representations:$r{i}){{{selection}}}"
            ));
            counts.push(representations.len());
            variables.insert(
                format!("r{i}"),
                serde_json::to_value(&representations).unwrap_or(serde_json::Value::Null),
            );
        }
        query.push('}');
        let request = FetchRequest {
            subgraph: batch.subgraph,
            kind: FetchKind::Entities {
                type_name: &type_name,
            },
            query,
            variables: Some(serde_json::Value::Object(variables)),
            authorization,
        };
        let outcome = fetch.fetch(request).await.map(|response| {
            let split = counts
                .iter()
                .enumerate()
                .map(|(i, &count)| split_entities(&response, &format!("e{i}"), count))
                .collect();
            Arc::new(split)
        });
        lock(&batch.state).phase = Phase::Done(outcome);
        batch.changed.notify_waiters();
    }
}
