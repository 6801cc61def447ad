//! The lab's second graph: a shop in four subgraphs over one seeded data set.
//!
//! - [`products`] owns `Product` (keys `upc` and `sku`) and says who sells it;
//! - [`inventory`] adds stock and a shipping estimate that `@requires` the product's
//!   price and weight;
//! - [`reviews`] owns `Review`, the union `Mention = Product | User`, and the reviews of
//!   products and users; a review's author `@provides` their username;
//! - [`accounts`] owns `User` (keys `id` and `username`) and their wishlists.
//!
//! The four are served by one binary, `commerce-service --subgraph NAME`, on
//! `subgraph-host` with the first graph's knobs (delays, faults, `--cache-control`,
//! the document cache, `/metrics`, the drain). [`data`] draws the data set every
//! subgraph reads, so four services started with the same data flags agree on every
//! id. [`executor`] puts the four schemas behind one executor type.

pub mod accounts;
pub mod data;
pub mod executor;
pub mod inventory;
pub mod products;
pub mod reviews;

use std::net::SocketAddr;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use async_graphql::{Context, EmptySubscription, ObjectType, Result, Schema, ValidationMode};

pub use data::{DataArgs, Scale};
pub use executor::Commerce;

/// One of the four subgraphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Subgraph {
    Products,
    Inventory,
    Reviews,
    Accounts,
}

impl Subgraph {
    pub const ALL: [Subgraph; 4] = [
        Subgraph::Products,
        Subgraph::Inventory,
        Subgraph::Reviews,
        Subgraph::Accounts,
    ];

    /// Its name: on the command line, in log lines and `/metrics`, and in the supergraph.
    pub fn name(self) -> &'static str {
        match self {
            Subgraph::Products => "products",
            Subgraph::Inventory => "inventory",
            Subgraph::Reviews => "reviews",
            Subgraph::Accounts => "accounts",
        }
    }

    /// Where it listens without `--listen`: 127.0.0.1, ports 3011 to 3014.
    pub fn default_listen(self) -> SocketAddr {
        let port = match self {
            Subgraph::Products => 3011,
            Subgraph::Inventory => 3012,
            Subgraph::Reviews => 3013,
            Subgraph::Accounts => 3014,
        };
        SocketAddr::from(([127, 0, 0, 1], port))
    }
}

/// The flags of `commerce-service` beyond the host's: which subgraph, and the data set.
#[derive(Debug, Clone, clap::Args)]
pub struct ServiceArgs {
    /// The subgraph to serve (default ports: products 3011, inventory 3012, reviews
    /// 3013, accounts 3014).
    #[arg(long, value_enum)]
    pub subgraph: Subgraph,
    #[command(flatten)]
    pub data: DataArgs,
}

/// A list argument `first` over `available` items: how many to give (all without
/// `first`), or an error for a negative count.
fn first_n(first: Option<i32>, available: usize) -> Result<usize> {
    match first {
        None => Ok(available),
        Some(n) => match usize::try_from(n) {
            Ok(n) => Ok(n.min(available)),
            Err(_) => Err(format!("first: {n}: a count is 0 or more").into()),
        },
    }
}

/// The subgraph's table, read-locked.
fn read<'a, T: Send + Sync + 'static>(ctx: &Context<'a>) -> RwLockReadGuard<'a, T> {
    ctx.data_unchecked::<Arc<RwLock<T>>>()
        .read()
        .unwrap_or_else(|p| p.into_inner())
}

/// The subgraph's table, write-locked (a mutation's read-modify-write holds it).
fn write<'a, T: Send + Sync + 'static>(ctx: &Context<'a>) -> RwLockWriteGuard<'a, T> {
    ctx.data_unchecked::<Arc<RwLock<T>>>()
        .write()
        .unwrap_or_else(|p| p.into_inner())
}

/// A subgraph's schema: `query` and `mutation` over the table `store`, with federation
/// on, validating as `mode` says.
fn federated<Q: ObjectType + 'static, M: ObjectType + 'static, T: Send + Sync + 'static>(
    query: Q,
    mutation: M,
    store: Arc<RwLock<T>>,
    mode: ValidationMode,
) -> Schema<Q, M, EmptySubscription> {
    Schema::build(query, mutation, EmptySubscription)
        .enable_federation()
        .validation_mode(mode)
        .data(store)
        .finish()
}
