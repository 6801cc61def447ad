//! The posts subgraph: `Post { pid title content author }`, `topPosts`, `getPost`,
//! `updatePostTitle`, and the `User.topPosts` field it adds to the users' `User`.
//!
//! The schema lives here; the table, its author index and its data sets in [`posts`].
//! Posts keep their id order (`p1`, `p2`, …), which is what "first `count` posts" means.
//! Data sits behind one `RwLock`; `updatePostTitle` holds the write lock for its
//! read-modify-write. Resolvers copy the rows they return, so no lock is held while a
//! response is built.
//!
//! Cache hints (async-graphql's `cache_control`, sent as the answer's `Cache-Control`):
//! a `Post` may be kept 60 s, mutations are `no-cache`. A gateway's `origin-ttl`
//! strategy reads them.

pub mod posts;

use std::sync::{Arc, RwLock};

use async_graphql::{
    ComplexObject, Context, EmptySubscription, Object, Result, Schema, SimpleObject,
    ValidationMode, ID,
};
use subgraph_host::Executors;

use posts::PostRow;
pub use posts::{DataArgs, Posts};

type Store = Arc<RwLock<Posts>>;

fn posts<'a>(ctx: &Context<'a>) -> std::sync::RwLockReadGuard<'a, Posts> {
    ctx.data_unchecked::<Store>()
        .read()
        .unwrap_or_else(|p| p.into_inner())
}

fn listed(rows: Vec<PostRow>) -> Option<Vec<Option<Post>>> {
    Some(rows.into_iter().map(|p| Some(Post(p))).collect())
}

/// A post; `author` is a reference to the users subgraph's `User`.
pub struct Post(PostRow);

#[Object(cache_control(max_age = 60))]
impl Post {
    async fn pid(&self) -> ID {
        ID(self.0.pid())
    }
    async fn title(&self) -> Option<&str> {
        Some(&self.0.title)
    }
    async fn content(&self) -> Option<String> {
        Some(self.0.content())
    }
    async fn author(&self) -> Option<User> {
        Some(User {
            id: ID(self.0.author_id()),
        })
    }
}

/// The users' `User`, extended here with `topPosts`.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct User {
    pub id: ID,
}

#[ComplexObject]
impl User {
    /// This user's first `count` posts.
    async fn top_posts(&self, ctx: &Context<'_>, count: i32) -> Option<Vec<Option<Post>>> {
        listed(posts(ctx).first_by(&self.id, count.max(0) as usize))
    }
}

pub struct Query;

#[Object]
impl Query {
    /// The first `count` posts.
    async fn top_posts(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 2)] count: Option<i32>,
    ) -> Option<Vec<Option<Post>>> {
        listed(posts(ctx).first(count.unwrap_or(2).max(0) as usize))
    }

    /// One post, or null when there is none with that id.
    async fn get_post(&self, ctx: &Context<'_>, pid: ID) -> Option<Post> {
        posts(ctx).get(&pid).map(Post)
    }

    #[graphql(entity)]
    async fn find_post_by_pid(&self, ctx: &Context<'_>, pid: ID) -> Option<Post> {
        posts(ctx).get(&pid).map(Post)
    }

    #[graphql(entity)]
    async fn find_user_by_id(&self, id: ID) -> User {
        User { id }
    }
}

pub struct Mutation;

#[Object(cache_control(no_cache))]
impl Mutation {
    /// Retitle a post; an unknown id is an error.
    async fn update_post_title(
        &self,
        ctx: &Context<'_>,
        pid: ID,
        title: String,
    ) -> Result<Option<Post>> {
        let mut store = ctx
            .data_unchecked::<Store>()
            .write()
            .unwrap_or_else(|p| p.into_inner());
        match store.retitle(&pid, title) {
            Some(post) => Ok(Some(Post(post))),
            None => Err(format!("no post with pid {:?}", pid.as_str()).into()),
        }
    }
}

pub type PostSchema = Schema<Query, Mutation, EmptySubscription>;

/// A fresh schema over the seed's four posts.
pub fn schema() -> PostSchema {
    schema_with(Posts::default())
}

/// A fresh schema over `posts`.
pub fn schema_with(posts: Posts) -> PostSchema {
    build(Store::new(RwLock::new(posts)), ValidationMode::Strict)
}

/// The host's two executors over `posts`: the schema, and the same schema over the
/// same data without repeated validation (see `subgraph_host::validated`).
pub fn executors(posts: Posts) -> Executors<PostSchema> {
    let store = Store::new(RwLock::new(posts));
    Executors::strict_and_fast(|mode| build(store.clone(), mode))
}

fn build(store: Store, mode: ValidationMode) -> PostSchema {
    Schema::build(Query, Mutation, EmptySubscription)
        .enable_federation()
        .validation_mode(mode)
        .data(store)
        .finish()
}
