//! The products subgraph: owns `Product` (keys `upc` and `sku`: two entity resolvers,
//! two `@key`s), with its name, description, category, price, weight and seller, and
//! adds `User.listings` (what a user sells) to the accounts' `User`.
//!
//! Its root fields: `topProducts(first)`, `product(upc)`, `productBySku(sku)`; its
//! mutation: `updatePrice(upc, price)`. Prices are kept in a table of overrides behind
//! one `RwLock`; every other attribute is drawn from the data set when read.
//!
//! Cache hints: a `Product` may be kept 60 s, its `price` 10 s (prices change by
//! mutation), a seller's `listings` 60 s; mutations are `no-cache`.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use async_graphql::{Context, EmptySubscription, Object, Result, ValidationMode, ID};
use subgraph_host::groups::Groups;

use crate::data::{ProductDraw, Scale};
use crate::{first_n, read, write};

/// The catalog: the data set's products, their prices as mutations left them, and
/// each seller's products.
#[derive(Debug)]
pub struct Catalog {
    scale: Scale,
    prices: HashMap<u32, u32>,
    by_seller: Groups,
}

impl Catalog {
    pub fn new(scale: Scale) -> Catalog {
        let sellers: Vec<u32> = (0..scale.products).map(|i| scale.seller(i)).collect();
        Catalog {
            scale,
            prices: HashMap::new(),
            by_seller: Groups::build(scale.users, &sellers),
        }
    }

    fn product(&self, index: u32) -> Product {
        let draw = self.scale.product(index);
        Product {
            upc: self.scale.upc(index),
            sku: self.scale.sku(index),
            price: self.prices.get(&index).copied().unwrap_or(draw.price),
            draw,
        }
    }
}

type Store = Arc<RwLock<Catalog>>;

/// A product as the products subgraph knows it.
pub struct Product {
    upc: String,
    sku: String,
    price: u32,
    draw: ProductDraw,
}

/// A product of the catalog.
#[Object(cache_control(max_age = 60))]
impl Product {
    /// Its UPC-A code (12 digits): a key.
    async fn upc(&self) -> ID {
        ID(self.upc.clone())
    }
    /// Its stock-keeping unit, `CAT-XXXXXXXX`: a key.
    async fn sku(&self) -> &str {
        &self.sku
    }
    async fn name(&self) -> &str {
        &self.draw.name
    }
    async fn description(&self) -> &str {
        &self.draw.description
    }
    async fn category(&self) -> &str {
        self.draw.category.label
    }
    /// In cents.
    #[graphql(cache_control(max_age = 10))]
    async fn price(&self) -> i32 {
        self.price as i32
    }
    /// In grams.
    async fn weight(&self) -> i32 {
        self.draw.weight as i32
    }
    /// Who sells it: a user of the accounts subgraph.
    async fn seller(&self) -> User {
        User {
            index: self.draw.seller,
        }
    }
}

/// The accounts' `User`, extended here with what they sell.
pub struct User {
    index: u32,
}

#[Object]
impl User {
    async fn id(&self, ctx: &Context<'_>) -> ID {
        ID(read::<Catalog>(ctx).scale.user_id(self.index))
    }
    /// The products this user sells, in catalog order (the first `first`, or all).
    async fn listings(&self, ctx: &Context<'_>, first: Option<i32>) -> Result<Vec<Product>> {
        let catalog = read::<Catalog>(ctx);
        let mine = catalog.by_seller.of(self.index as usize);
        let n = first_n(first, mine.len())?;
        Ok(mine[..n].iter().map(|&i| catalog.product(i)).collect())
    }
}

pub struct Query;

#[Object]
impl Query {
    /// The catalog's first `first` products.
    async fn top_products(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 5)] first: i32,
    ) -> Result<Vec<Product>> {
        let catalog = read::<Catalog>(ctx);
        let n = first_n(Some(first), catalog.scale.products as usize)?;
        Ok((0..n as u32).map(|i| catalog.product(i)).collect())
    }

    /// The product with this UPC, or null.
    async fn product(&self, ctx: &Context<'_>, upc: ID) -> Option<Product> {
        by_upc(ctx, &upc)
    }

    /// The product with this SKU, or null.
    async fn product_by_sku(&self, ctx: &Context<'_>, sku: String) -> Option<Product> {
        by_sku(ctx, &sku)
    }

    #[graphql(entity)]
    async fn find_product_by_upc(&self, ctx: &Context<'_>, upc: ID) -> Option<Product> {
        by_upc(ctx, &upc)
    }

    #[graphql(entity)]
    async fn find_product_by_sku(&self, ctx: &Context<'_>, sku: String) -> Option<Product> {
        by_sku(ctx, &sku)
    }

    #[graphql(entity)]
    async fn find_user_by_id(&self, ctx: &Context<'_>, id: ID) -> Option<User> {
        let index = read::<Catalog>(ctx).scale.user_by_id(&id)?;
        Some(User { index })
    }
}

fn by_upc(ctx: &Context<'_>, upc: &str) -> Option<Product> {
    let catalog = read::<Catalog>(ctx);
    let index = catalog.scale.product_by_upc(upc)?;
    Some(catalog.product(index))
}

fn by_sku(ctx: &Context<'_>, sku: &str) -> Option<Product> {
    let catalog = read::<Catalog>(ctx);
    let index = catalog.scale.product_by_sku(sku)?;
    Some(catalog.product(index))
}

pub struct Mutation;

#[Object(cache_control(no_cache))]
impl Mutation {
    /// Set a product's price, in cents (0 or more); an unknown UPC is an error.
    async fn update_price(&self, ctx: &Context<'_>, upc: ID, price: i32) -> Result<Product> {
        let price = u32::try_from(price)
            .map_err(|_| format!("price {price}: a price is 0 cents or more"))?;
        let mut catalog = write::<Catalog>(ctx);
        let index = catalog
            .scale
            .product_by_upc(&upc)
            .ok_or_else(|| format!("no product with upc {:?}", upc.as_str()))?;
        catalog.prices.insert(index, price);
        Ok(catalog.product(index))
    }
}

pub type Schema = async_graphql::Schema<Query, Mutation, EmptySubscription>;

/// The products subgraph over `catalog`, validating as `mode` says.
pub fn schema(catalog: Store, mode: ValidationMode) -> Schema {
    crate::federated(Query, Mutation, catalog, mode)
}

/// A fresh store over the data set at `scale`.
pub fn store(scale: Scale) -> Store {
    Arc::new(RwLock::new(Catalog::new(scale)))
}
