//! The users subgraph: `User { id name }`, `me`, `createUser`, `updateUser`.
//!
//! Cache hints (async-graphql's `cache_control`, sent as the answer's `Cache-Control`):
//! a `User` may be kept 10 s, `me` is `private` (one caller's own data), mutations are
//! `no-cache`. A gateway's `origin-ttl` strategy reads them.
//!
//! The schema lives here; the table and its data sets in [`users`]. Data sits in memory
//! behind one `RwLock`. Reads take the shared lock; the two mutations take the exclusive
//! lock for the whole read-modify-write, so that concurrent `createUser` calls never
//! hand out the same id.

pub mod users;

use std::sync::{Arc, RwLock};

use async_graphql::{
    Context, EmptySubscription, Object, Result, Schema, SimpleObject, ValidationMode, ID,
};
use subgraph_host::{Bearer, Executors};

pub use users::{DataArgs, Users};

/// A user of the lab's social network.
#[derive(Debug, Clone, SimpleObject)]
#[graphql(complex, cache_control(max_age = 10))]
pub struct User {
    pub id: ID,
    pub name: String,
}

#[async_graphql::ComplexObject]
impl User {}

type Store = Arc<RwLock<Users>>;

fn store<'a>(ctx: &Context<'a>) -> &'a Store {
    ctx.data_unchecked::<Store>()
}

fn read(ctx: &Context<'_>, id: &str) -> Option<User> {
    let users = store(ctx).read().unwrap_or_else(|p| p.into_inner());
    let name = users.name(id)?;
    Some(User {
        id: ID::from(id),
        name,
    })
}

pub struct Query;

#[Object]
impl Query {
    /// The caller: the user named by `authorization: Bearer <id>`, or `u1` without one.
    #[graphql(cache_control(private))]
    async fn me(&self, ctx: &Context<'_>) -> Option<User> {
        let id = ctx
            .data_opt::<Bearer>()
            .map(|b| b.0.as_str())
            .unwrap_or("u1");
        read(ctx, id)
    }

    #[graphql(entity)]
    async fn find_user_by_id(&self, ctx: &Context<'_>, id: ID) -> Option<User> {
        read(ctx, &id)
    }
}

pub struct Mutation;

#[Object(cache_control(no_cache))]
impl Mutation {
    /// Create a user; ids are assigned in order: `u3`, `u4`, … (after `uN` with `--users N`).
    async fn create_user(&self, ctx: &Context<'_>, name: String) -> Option<User> {
        let mut users = store(ctx).write().unwrap_or_else(|p| p.into_inner());
        let id = users.create(name.clone());
        Some(User {
            id: ID::from(id),
            name,
        })
    }

    /// Rename a user; an unknown id is an error.
    async fn update_user(&self, ctx: &Context<'_>, id: ID, name: String) -> Result<Option<User>> {
        let mut users = store(ctx).write().unwrap_or_else(|p| p.into_inner());
        if users.rename(&id, name.clone()) {
            Ok(Some(User { id, name }))
        } else {
            Err(format!("no user with id {:?}", id.as_str()).into())
        }
    }
}

pub type UserSchema = Schema<Query, Mutation, EmptySubscription>;

/// A fresh schema over the seed's two users.
pub fn schema() -> UserSchema {
    schema_with(Users::default())
}

/// A fresh schema over `users`.
pub fn schema_with(users: Users) -> UserSchema {
    build(Store::new(RwLock::new(users)), ValidationMode::Strict)
}

/// The host's two executors over `users`: the schema, and the same schema over the
/// same data without repeated validation (see `subgraph_host::validated`).
pub fn executors(users: Users) -> Executors<UserSchema> {
    let store = Store::new(RwLock::new(users));
    Executors::strict_and_fast(|mode| build(store.clone(), mode))
}

fn build(store: Store, mode: ValidationMode) -> UserSchema {
    Schema::build(Query, Mutation, EmptySubscription)
        .enable_federation()
        .validation_mode(mode)
        .data(store)
        .finish()
}
