//! One executor type for the four subgraphs' schemas, so that one binary can hand any
//! of them to `subgraph-host`, and the host's two executors (strict and fast
//! validation) over the same tables.

use std::sync::Arc;

use async_graphql::futures_util::stream::BoxStream;
use async_graphql::{Data, Executor, Request, Response, ValidationMode};
use subgraph_host::Executors;

use crate::{accounts, inventory, products, reviews, Scale, Subgraph};

/// The schema of one of the four subgraphs.
#[derive(Clone)]
pub enum Commerce {
    Products(products::Schema),
    Inventory(inventory::Schema),
    Reviews(reviews::Schema),
    Accounts(accounts::Schema),
}

impl Commerce {
    /// `subgraph` over a fresh data set at `scale`, validating every request in full.
    pub fn new(subgraph: Subgraph, scale: Scale) -> Commerce {
        executors(subgraph, scale).strict
    }
}

/// The host's two executors for `subgraph` over one fresh data set at `scale`: strict,
/// and the same schema over the same tables without repeated validation (see
/// `subgraph_host::validated`).
pub fn executors(subgraph: Subgraph, scale: Scale) -> Executors<Commerce> {
    match subgraph {
        Subgraph::Products => {
            let store = products::store(scale);
            Executors::strict_and_fast(|mode: ValidationMode| {
                Commerce::Products(products::schema(store.clone(), mode))
            })
        }
        Subgraph::Inventory => {
            let store = inventory::store(scale);
            Executors::strict_and_fast(|mode: ValidationMode| {
                Commerce::Inventory(inventory::schema(store.clone(), mode))
            })
        }
        Subgraph::Reviews => {
            let store = reviews::store(scale);
            Executors::strict_and_fast(|mode: ValidationMode| {
                Commerce::Reviews(reviews::schema(store.clone(), mode))
            })
        }
        Subgraph::Accounts => {
            let store = accounts::store(scale);
            Executors::strict_and_fast(|mode: ValidationMode| {
                Commerce::Accounts(accounts::schema(store.clone(), mode))
            })
        }
    }
}

impl Executor for Commerce {
    async fn execute(&self, request: Request) -> Response {
        match self {
            Commerce::Products(s) => s.execute(request).await,
            Commerce::Inventory(s) => s.execute(request).await,
            Commerce::Reviews(s) => s.execute(request).await,
            Commerce::Accounts(s) => s.execute(request).await,
        }
    }

    fn execute_stream(
        &self,
        request: Request,
        session_data: Option<Arc<Data>>,
    ) -> BoxStream<'static, Response> {
        match self {
            Commerce::Products(s) => Executor::execute_stream(s, request, session_data),
            Commerce::Inventory(s) => Executor::execute_stream(s, request, session_data),
            Commerce::Reviews(s) => Executor::execute_stream(s, request, session_data),
            Commerce::Accounts(s) => Executor::execute_stream(s, request, session_data),
        }
    }
}
