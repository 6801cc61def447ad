//! The posts subgraph: `Post { pid title content author }`, `topPosts`, `getPost`,
//! `updatePostTitle`, and the `User.topPosts` field it adds to the users' `User`.
//!
//! Posts keep their insertion order (`p1`..`p4`), which is what "first `count` posts"
//! means. Data sits behind one `RwLock`; `updatePostTitle` holds the write lock for its
//! read-modify-write.

use std::sync::{Arc, RwLock};

use async_graphql::{
    ComplexObject, Context, EmptySubscription, Object, Result, Schema, SimpleObject, ID,
};

#[derive(Debug, Clone)]
struct StoredPost {
    pid: String,
    title: String,
    content: String,
    author: String,
}

/// The in-memory post table, in insertion order.
#[derive(Debug)]
pub struct Posts(Vec<StoredPost>);

impl Default for Posts {
    fn default() -> Self {
        let authors = ["u1", "u2", "u1", "u1"];
        Posts(
            authors
                .iter()
                .enumerate()
                .map(|(i, author)| StoredPost {
                    pid: format!("p{}", i + 1),
                    title: format!("Post {}", i + 1),
                    content: format!("Content {}", i + 1),
                    author: author.to_string(),
                })
                .collect(),
        )
    }
}

type Store = Arc<RwLock<Posts>>;

fn posts<'a>(ctx: &Context<'a>) -> std::sync::RwLockReadGuard<'a, Posts> {
    ctx.data_unchecked::<Store>()
        .read()
        .unwrap_or_else(|p| p.into_inner())
}

/// A post; `author` is a reference to the users subgraph's `User`.
pub struct Post(StoredPost);

#[Object]
impl Post {
    async fn pid(&self) -> ID {
        ID::from(self.0.pid.as_str())
    }
    async fn title(&self) -> Option<&str> {
        Some(&self.0.title)
    }
    async fn content(&self) -> Option<&str> {
        Some(&self.0.content)
    }
    async fn author(&self) -> Option<User> {
        Some(User {
            id: ID::from(self.0.author.as_str()),
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
        let store = posts(ctx);
        let mine = store.0.iter().filter(|p| p.author == self.id.as_str());
        Some(
            mine.take(count.max(0) as usize)
                .map(|p| Some(Post(p.clone())))
                .collect(),
        )
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
        let count = count.unwrap_or(2).max(0) as usize;
        Some(
            posts(ctx)
                .0
                .iter()
                .take(count)
                .map(|p| Some(Post(p.clone())))
                .collect(),
        )
    }

    /// One post, or null when there is none with that id.
    async fn get_post(&self, ctx: &Context<'_>, pid: ID) -> Option<Post> {
        find(ctx, &pid)
    }

    #[graphql(entity)]
    async fn find_post_by_pid(&self, ctx: &Context<'_>, pid: ID) -> Option<Post> {
        find(ctx, &pid)
    }

    #[graphql(entity)]
    async fn find_user_by_id(&self, id: ID) -> User {
        User { id }
    }
}

fn find(ctx: &Context<'_>, pid: &str) -> Option<Post> {
    posts(ctx)
        .0
        .iter()
        .find(|p| p.pid == pid)
        .map(|p| Post(p.clone()))
}

pub struct Mutation;

#[Object]
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
        match store.0.iter_mut().find(|p| p.pid == pid.as_str()) {
            Some(post) => {
                post.title = title;
                Ok(Some(Post(post.clone())))
            }
            None => Err(format!("no post with pid {:?}", pid.as_str()).into()),
        }
    }
}

pub type PostSchema = Schema<Query, Mutation, EmptySubscription>;

/// A fresh schema over the four seed posts.
pub fn schema() -> PostSchema {
    Schema::build(Query, Mutation, EmptySubscription)
        .enable_federation()
        .data(Store::default())
        .finish()
}
