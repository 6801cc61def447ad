//! The reviews subgraph: owns `Review` (key `id`) and the union `Mention = Product |
//! User`, whose members are entities owned by two other subgraphs (products and
//! accounts); adds `reviews`, `reviewCount` and `averageRating` to the products'
//! `Product` (key `upc`) and `reviews` to the accounts' `User` (key `id`).
//!
//! `Review.author` `@provides(fields: "username")`: usernames never change, so this
//! subgraph draws them from the same data set as accounts and answers them itself,
//! sparing the gateway a fetch from accounts when a query wants only the username.
//! `User.username` is `@external` here (owned by accounts, where it is `@shareable`).
//!
//! Its root fields: `review(id)`, `latestReviews(first)`; its mutation:
//! `addReview(upc, authorId, rating, body)`. Reviews added by mutation are kept behind
//! one `RwLock`, after the data set's (ids go on from there); the data set's are drawn
//! when read, with each author's reviews indexed once at start.
//!
//! Cache hints: a `Review` may be kept 60 s, the lists a review can join
//! (`Product.reviews`, `User.reviews`, `reviewCount`, `averageRating`,
//! `latestReviews`) 10 s; mutations are `no-cache`.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use async_graphql::{Context, EmptySubscription, Object, Result, Union, ValidationMode, ID};
use subgraph_host::groups::Groups;

use crate::data::{Mentioned, Scale};
use crate::{first_n, read, write};

/// The longest body `addReview` takes, in characters.
pub const MAX_BODY: usize = 2_000;

/// One review as read: a copy, so that no lock is held while it is resolved.
#[derive(Debug, Clone)]
struct Row {
    index: u32,
    product: u32,
    author: u32,
    rating: u8,
    body: String,
    mentions: Vec<Mentioned>,
}

/// A review added by mutation.
#[derive(Debug)]
struct Added {
    product: u32,
    author: u32,
    rating: u8,
    body: String,
}

/// Every review: the data set's, indexed by author, and those added since.
#[derive(Debug)]
pub struct Reviews {
    scale: Scale,
    by_author: Groups,
    added: Vec<Added>,
    added_by_author: HashMap<u32, Vec<u32>>,
    added_by_product: HashMap<u32, Vec<u32>>,
}

impl Reviews {
    pub fn new(scale: Scale) -> Reviews {
        let authors: Vec<u32> = (0..scale.reviews())
            .map(|r| scale.review_author(r))
            .collect();
        Reviews {
            scale,
            by_author: Groups::build(scale.users, &authors),
            added: Vec::new(),
            added_by_author: HashMap::new(),
            added_by_product: HashMap::new(),
        }
    }

    fn len(&self) -> u32 {
        self.scale.reviews() + self.added.len() as u32
    }

    fn row(&self, index: u32) -> Row {
        let generated = self.scale.reviews();
        if index < generated {
            let d = self.scale.review(index);
            Row {
                index,
                product: d.product,
                author: d.author,
                rating: d.rating,
                body: d.body,
                mentions: d.mentions,
            }
        } else {
            let a = &self.added[(index - generated) as usize];
            Row {
                index,
                product: a.product,
                author: a.author,
                rating: a.rating,
                body: a.body.clone(),
                mentions: Vec::new(),
            }
        }
    }

    /// Product `p`'s reviews, in id order.
    fn of_product(&self, p: u32) -> impl Iterator<Item = u32> + '_ {
        let per = self.scale.reviews_per_product;
        let added = self.added_by_product.get(&p).map(Vec::as_slice);
        (p * per..(p + 1) * per).chain(added.unwrap_or(&[]).iter().copied())
    }

    /// User `u`'s reviews, in id order.
    fn of_author(&self, u: u32) -> impl Iterator<Item = u32> + '_ {
        let added = self.added_by_author.get(&u).map(Vec::as_slice);
        let mine = self.by_author.of(u as usize).iter();
        mine.chain(added.unwrap_or(&[]).iter()).copied()
    }

    fn rating(&self, index: u32) -> u8 {
        match index.checked_sub(self.scale.reviews()) {
            None => self.scale.review(index).rating,
            Some(a) => self.added[a as usize].rating,
        }
    }

    fn listed(&self, ids: impl Iterator<Item = u32>, first: Option<i32>) -> Result<Vec<Review>> {
        let n = first_n(first, usize::MAX)?;
        Ok(ids.take(n).map(|r| Review(self.row(r))).collect())
    }
}

type Store = Arc<RwLock<Reviews>>;

/// A review of a product by a user.
pub struct Review(Row);

#[Object(cache_control(max_age = 60))]
impl Review {
    async fn id(&self, ctx: &Context<'_>) -> ID {
        ID(read::<Reviews>(ctx).scale.review_id(self.0.index))
    }
    async fn body(&self) -> &str {
        &self.0.body
    }
    /// From 1 to 5.
    async fn rating(&self) -> i32 {
        i32::from(self.0.rating)
    }
    /// Who wrote it; this subgraph can give their `username` too.
    #[graphql(provides = "username")]
    async fn author(&self) -> User {
        User {
            index: self.0.author,
        }
    }
    /// The product reviewed.
    async fn product(&self) -> Product {
        Product {
            index: self.0.product,
        }
    }
    /// Other products and users the review mentions.
    async fn mentions(&self) -> Vec<Mention> {
        self.0
            .mentions
            .iter()
            .map(|m| match *m {
                Mentioned::Product(index) => Mention::Product(Product { index }),
                Mentioned::User(index) => Mention::User(User { index }),
            })
            .collect()
    }
}

/// A product or a user named in a review.
#[derive(Union)]
pub enum Mention {
    Product(Product),
    User(User),
}

/// The products' `Product`, extended here with its reviews.
pub struct Product {
    index: u32,
}

#[Object]
impl Product {
    async fn upc(&self, ctx: &Context<'_>) -> ID {
        ID(read::<Reviews>(ctx).scale.upc(self.index))
    }
    /// Its reviews, oldest first (the first `first`, or all).
    #[graphql(cache_control(max_age = 10))]
    async fn reviews(&self, ctx: &Context<'_>, first: Option<i32>) -> Result<Vec<Review>> {
        let reviews = read::<Reviews>(ctx);
        reviews.listed(reviews.of_product(self.index), first)
    }
    #[graphql(cache_control(max_age = 10))]
    async fn review_count(&self, ctx: &Context<'_>) -> i32 {
        read::<Reviews>(ctx).of_product(self.index).count() as i32
    }
    /// The mean rating, or null without reviews.
    #[graphql(cache_control(max_age = 10))]
    async fn average_rating(&self, ctx: &Context<'_>) -> Option<f64> {
        let reviews = read::<Reviews>(ctx);
        let (n, sum) = reviews
            .of_product(self.index)
            .fold((0u32, 0u32), |(n, s), r| {
                (n + 1, s + u32::from(reviews.rating(r)))
            });
        (n > 0).then(|| f64::from(sum) / f64::from(n))
    }
}

/// The accounts' `User`, extended here with the reviews they wrote.
pub struct User {
    index: u32,
}

#[Object]
impl User {
    async fn id(&self, ctx: &Context<'_>) -> ID {
        ID(read::<Reviews>(ctx).scale.user_id(self.index))
    }
    // Owned by accounts; answered here for `Review.author` (`@provides`).
    #[graphql(external)]
    async fn username(&self, ctx: &Context<'_>) -> String {
        read::<Reviews>(ctx).scale.username(self.index)
    }
    /// The reviews this user wrote, oldest first (the first `first`, or all).
    #[graphql(cache_control(max_age = 10))]
    async fn reviews(&self, ctx: &Context<'_>, first: Option<i32>) -> Result<Vec<Review>> {
        let reviews = read::<Reviews>(ctx);
        reviews.listed(reviews.of_author(self.index), first)
    }
}

pub struct Query;

#[Object]
impl Query {
    /// The review with this id, or null.
    async fn review(&self, ctx: &Context<'_>, id: ID) -> Option<Review> {
        by_id(ctx, &id)
    }

    /// The newest `first` reviews, newest first.
    #[graphql(cache_control(max_age = 10))]
    async fn latest_reviews(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 10)] first: i32,
    ) -> Result<Vec<Review>> {
        let reviews = read::<Reviews>(ctx);
        reviews.listed((0..reviews.len()).rev(), Some(first))
    }

    #[graphql(entity)]
    async fn find_review_by_id(&self, ctx: &Context<'_>, id: ID) -> Option<Review> {
        by_id(ctx, &id)
    }

    #[graphql(entity)]
    async fn find_product_by_upc(&self, ctx: &Context<'_>, upc: ID) -> Option<Product> {
        let index = read::<Reviews>(ctx).scale.product_by_upc(&upc)?;
        Some(Product { index })
    }

    #[graphql(entity)]
    async fn find_user_by_id(&self, ctx: &Context<'_>, id: ID) -> Option<User> {
        let index = read::<Reviews>(ctx).scale.user_by_id(&id)?;
        Some(User { index })
    }
}

fn by_id(ctx: &Context<'_>, id: &str) -> Option<Review> {
    let reviews = read::<Reviews>(ctx);
    let index = reviews
        .scale
        .review_row(id)
        .filter(|&r| r < reviews.len())?;
    Some(Review(reviews.row(index)))
}

pub struct Mutation;

#[Object(cache_control(no_cache))]
impl Mutation {
    /// Review product `upc` as user `authorId`: a rating from 1 to 5 and a body of 1 to
    /// 2,000 characters. The new review's id follows the last one's.
    async fn add_review(
        &self,
        ctx: &Context<'_>,
        upc: ID,
        author_id: ID,
        rating: i32,
        body: String,
    ) -> Result<Review> {
        if !(1..=5).contains(&rating) {
            return Err(format!("rating {rating}: a rating is 1 to 5").into());
        }
        let length = body.chars().count();
        if body.trim().is_empty() || length > MAX_BODY {
            return Err(
                format!("a body is 1 to {MAX_BODY} characters, not blank ({length})").into(),
            );
        }
        let mut reviews = write::<Reviews>(ctx);
        let scale = reviews.scale;
        let product = scale
            .product_by_upc(&upc)
            .ok_or_else(|| format!("no product with upc {:?}", upc.as_str()))?;
        let author = scale
            .user_by_id(&author_id)
            .ok_or_else(|| format!("no user with id {:?}", author_id.as_str()))?;
        let index = reviews.len();
        if index == u32::MAX {
            return Err("no review ids are left".into());
        }
        reviews.added.push(Added {
            product,
            author,
            rating: rating as u8,
            body,
        });
        reviews
            .added_by_author
            .entry(author)
            .or_default()
            .push(index);
        reviews
            .added_by_product
            .entry(product)
            .or_default()
            .push(index);
        Ok(Review(reviews.row(index)))
    }
}

pub type Schema = async_graphql::Schema<Query, Mutation, EmptySubscription>;

/// The reviews subgraph over `reviews`, validating as `mode` says.
pub fn schema(reviews: Store, mode: ValidationMode) -> Schema {
    crate::federated(Query, Mutation, reviews, mode)
}

/// A fresh store over the data set at `scale`.
pub fn store(scale: Scale) -> Store {
    Arc::new(RwLock::new(Reviews::new(scale)))
}
