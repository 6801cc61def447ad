//! The accounts subgraph: owns `User` (keys `id` and `username`: two entity resolvers,
//! two `@key`s) with their name, the day they joined, and their wishlist of products.
//! `username` is `@shareable`, because reviews answers it too (`@provides`). A
//! wishlist's `Product` is a reference this subgraph cannot resolve: its only field is
//! the key, declared `@key(fields: "upc", resolvable: false)`.
//!
//! Its root fields: `me` (the user named by `authorization: Bearer <id>`, else `u1`),
//! `user(id)`, `userByUsername(username)`, `users(first)`; its mutations:
//! `updateName(id, name)`, `addToWishlist(userId, upc)`. What mutations change is kept
//! in tables of overrides behind one `RwLock`; the rest is drawn when read.
//!
//! Cache hints: a `User` may be kept 30 s, a wishlist 10 s, `me` is `private` (one
//! caller's own data); mutations are `no-cache`.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use async_graphql::{Context, EmptySubscription, Object, Result, SimpleObject, ValidationMode, ID};
use subgraph_host::Bearer;

use crate::data::{Scale, UserDraw};
use crate::{first_n, read, write};

/// The longest name `updateName` takes, in characters.
pub const MAX_NAME: usize = 200;

/// Every user: the data set's, with the names and wishlists mutations changed.
#[derive(Debug)]
pub struct Accounts {
    scale: Scale,
    names: HashMap<u32, String>,
    wishlists: HashMap<u32, Vec<u32>>,
}

impl Accounts {
    pub fn new(scale: Scale) -> Accounts {
        Accounts {
            scale,
            names: HashMap::new(),
            wishlists: HashMap::new(),
        }
    }

    fn wishlist(&self, index: u32) -> Vec<u32> {
        match self.wishlists.get(&index) {
            Some(list) => list.clone(),
            None => self.scale.wishlist(index),
        }
    }

    fn user(&self, index: u32) -> User {
        let mut draw = self.scale.user(index);
        if let Some(name) = self.names.get(&index) {
            draw.name.clone_from(name);
        }
        User {
            id: self.scale.user_id(index),
            draw,
            wishlist: self
                .wishlist(index)
                .into_iter()
                .map(|p| self.scale.upc(p))
                .collect(),
        }
    }
}

type Store = Arc<RwLock<Accounts>>;

/// A user of the shop.
pub struct User {
    id: String,
    draw: UserDraw,
    wishlist: Vec<String>,
}

#[Object(cache_control(max_age = 30))]
impl User {
    async fn id(&self) -> ID {
        ID(self.id.clone())
    }
    /// Unique, and never changes: a key.
    #[graphql(shareable)]
    async fn username(&self) -> &str {
        &self.draw.username
    }
    async fn name(&self) -> &str {
        &self.draw.name
    }
    /// The day they joined, `YYYY-MM-DD`.
    async fn joined(&self) -> &str {
        &self.draw.joined
    }
    /// Products they saved for later, oldest first (the first `first`, or all).
    #[graphql(cache_control(max_age = 10))]
    async fn wishlist(&self, first: Option<i32>) -> Result<Vec<Product>> {
        let n = first_n(first, self.wishlist.len())?;
        Ok(self.wishlist[..n]
            .iter()
            .map(|upc| Product {
                upc: ID(upc.clone()),
            })
            .collect())
    }
}

// The products' `Product`, only a reference here. (A comment, not a GraphQL
// description: the supergraph takes each type's description from its owner.)
#[derive(SimpleObject)]
#[graphql(unresolvable)]
pub struct Product {
    upc: ID,
}

pub struct Query;

#[Object]
impl Query {
    /// The caller: the user named by `authorization: Bearer <id>`, or `u1` without one.
    #[graphql(cache_control(private))]
    async fn me(&self, ctx: &Context<'_>) -> Option<User> {
        let id = ctx.data_opt::<Bearer>().map_or("u1", |b| b.0.as_str());
        by_id(ctx, id)
    }

    /// The user with this id, or null.
    async fn user(&self, ctx: &Context<'_>, id: ID) -> Option<User> {
        by_id(ctx, &id)
    }

    /// The user with this username, or null.
    async fn user_by_username(&self, ctx: &Context<'_>, username: String) -> Option<User> {
        by_username(ctx, &username)
    }

    /// The first `first` users, in id order.
    async fn users(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 10)] first: i32,
    ) -> Result<Vec<User>> {
        let accounts = read::<Accounts>(ctx);
        let n = first_n(Some(first), accounts.scale.users as usize)?;
        Ok((0..n as u32).map(|j| accounts.user(j)).collect())
    }

    #[graphql(entity)]
    async fn find_user_by_id(&self, ctx: &Context<'_>, id: ID) -> Option<User> {
        by_id(ctx, &id)
    }

    #[graphql(entity)]
    async fn find_user_by_username(&self, ctx: &Context<'_>, username: String) -> Option<User> {
        by_username(ctx, &username)
    }
}

fn by_id(ctx: &Context<'_>, id: &str) -> Option<User> {
    let accounts = read::<Accounts>(ctx);
    let index = accounts.scale.user_by_id(id)?;
    Some(accounts.user(index))
}

fn by_username(ctx: &Context<'_>, username: &str) -> Option<User> {
    let accounts = read::<Accounts>(ctx);
    let index = accounts.scale.user_by_username(username)?;
    Some(accounts.user(index))
}

pub struct Mutation;

#[Object(cache_control(no_cache))]
impl Mutation {
    /// Rename a user (1 to 200 characters, not blank); an unknown id is an error.
    async fn update_name(&self, ctx: &Context<'_>, id: ID, name: String) -> Result<User> {
        let length = name.chars().count();
        if name.trim().is_empty() || length > MAX_NAME {
            return Err(
                format!("a name is 1 to {MAX_NAME} characters, not blank ({length})").into(),
            );
        }
        let mut accounts = write::<Accounts>(ctx);
        let index = accounts
            .scale
            .user_by_id(&id)
            .ok_or_else(|| format!("no user with id {:?}", id.as_str()))?;
        accounts.names.insert(index, name);
        Ok(accounts.user(index))
    }

    /// Add a product to a user's wishlist (at the end; nothing changes if it is there
    /// already); an unknown user or UPC is an error.
    async fn add_to_wishlist(&self, ctx: &Context<'_>, user_id: ID, upc: ID) -> Result<User> {
        let mut accounts = write::<Accounts>(ctx);
        let scale = accounts.scale;
        let index = scale
            .user_by_id(&user_id)
            .ok_or_else(|| format!("no user with id {:?}", user_id.as_str()))?;
        let product = scale
            .product_by_upc(&upc)
            .ok_or_else(|| format!("no product with upc {:?}", upc.as_str()))?;
        let mut list = accounts.wishlist(index);
        if !list.contains(&product) {
            list.push(product);
        }
        accounts.wishlists.insert(index, list);
        Ok(accounts.user(index))
    }
}

pub type Schema = async_graphql::Schema<Query, Mutation, EmptySubscription>;

/// The accounts subgraph over `accounts`, validating as `mode` says.
pub fn schema(accounts: Store, mode: ValidationMode) -> Schema {
    crate::federated(Query, Mutation, accounts, mode)
}

/// A fresh store over the data set at `scale`.
pub fn store(scale: Scale) -> Store {
    Arc::new(RwLock::new(Accounts::new(scale)))
}
