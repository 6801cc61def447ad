//! The users subgraph: `User { id name }`, `me`, `createUser`, `updateUser`.
//!
//! Data lives in memory behind one `RwLock`. Reads take the shared lock; the two
//! mutations take the exclusive lock for the whole read-modify-write, so that
//! concurrent `createUser` calls never hand out the same id.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use async_graphql::{Context, EmptySubscription, Object, Result, Schema, SimpleObject, ID};
use subgraph_host::Bearer;

/// A user of the lab's tiny social network.
#[derive(Debug, Clone, SimpleObject)]
#[graphql(complex)]
pub struct User {
    pub id: ID,
    pub name: String,
}

#[async_graphql::ComplexObject]
impl User {}

/// The in-memory user table.
#[derive(Debug)]
pub struct Users {
    by_id: BTreeMap<String, User>,
    next_id: u64,
}

impl Default for Users {
    fn default() -> Self {
        let mut by_id = BTreeMap::new();
        for (id, name) in [("u1", "John"), ("u2", "Jane")] {
            by_id.insert(
                id.to_string(),
                User {
                    id: ID::from(id),
                    name: name.to_string(),
                },
            );
        }
        Users { by_id, next_id: 3 }
    }
}

type Store = Arc<RwLock<Users>>;

fn store<'a>(ctx: &Context<'a>) -> &'a Store {
    ctx.data_unchecked::<Store>()
}

fn read(ctx: &Context<'_>, id: &str) -> Option<User> {
    let users = store(ctx).read().unwrap_or_else(|p| p.into_inner());
    users.by_id.get(id).cloned()
}

pub struct Query;

#[Object]
impl Query {
    /// The caller: the user named by `authorization: Bearer <id>`, or `u1` without one.
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

#[Object]
impl Mutation {
    /// Create a user; ids are assigned in order: `u3`, `u4`, …
    async fn create_user(&self, ctx: &Context<'_>, name: String) -> Option<User> {
        let mut users = store(ctx).write().unwrap_or_else(|p| p.into_inner());
        let id = format!("u{}", users.next_id);
        users.next_id += 1;
        let user = User {
            id: ID::from(id.clone()),
            name,
        };
        users.by_id.insert(id, user.clone());
        Some(user)
    }

    /// Rename a user; an unknown id is an error.
    async fn update_user(&self, ctx: &Context<'_>, id: ID, name: String) -> Result<Option<User>> {
        let mut users = store(ctx).write().unwrap_or_else(|p| p.into_inner());
        match users.by_id.get_mut(id.as_str()) {
            Some(user) => {
                user.name = name;
                Ok(Some(user.clone()))
            }
            None => Err(format!("no user with id {:?}", id.as_str()).into()),
        }
    }
}

pub type UserSchema = Schema<Query, Mutation, EmptySubscription>;

/// A fresh schema over the two seed users.
pub fn schema() -> UserSchema {
    Schema::build(Query, Mutation, EmptySubscription)
        .enable_federation()
        .data(Store::default())
        .finish()
}
