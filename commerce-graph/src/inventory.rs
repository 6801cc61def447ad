//! The inventory subgraph: adds stock and shipping to the products' `Product` (key
//! `upc`): `quantity`, `inStock`, and `shippingEstimate`, which `@requires` the
//! product's `price` and `weight`. Those two are `@external`: owned by products, sent
//! here by the gateway in the entity's representation, read by the entity resolver.
//!
//! Its root field: `outOfStock(first)`; its mutation: `restock(upc, quantity)`. Units
//! moved by mutations are kept in a table of overrides behind one `RwLock`; every other
//! product's stock is drawn from the data set when read.
//!
//! Cache hints: stock (`quantity`, `inStock`) may be kept 5 s, a shipping estimate 60 s
//! (a pure function of its inputs); mutations are `no-cache`.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use async_graphql::{Context, EmptySubscription, Object, Result, ValidationMode, ID};

use crate::data::Scale;
use crate::{first_n, read, write};

/// The most units one `restock` may add.
pub const MAX_RESTOCK: i32 = 1_000_000;

/// The stock of every product: the data set's, and what mutations changed.
#[derive(Debug)]
pub struct Stock {
    scale: Scale,
    units: HashMap<u32, u32>,
}

impl Stock {
    pub fn new(scale: Scale) -> Stock {
        Stock {
            scale,
            units: HashMap::new(),
        }
    }

    fn units(&self, index: u32) -> u32 {
        self.units
            .get(&index)
            .copied()
            .unwrap_or_else(|| self.scale.stock(index))
    }

    fn product(&self, index: u32, inputs: Inputs) -> Product {
        Product {
            upc: self.scale.upc(index),
            units: self.units(index),
            inputs,
        }
    }
}

type Store = Arc<RwLock<Stock>>;

/// Shipping one unit, in cents: 3.99, plus 1.25 per started kilogram; the 3.99 is
/// waived from a price of 100.00. Both inputs come from the products subgraph.
pub fn shipping_estimate(price: i32, weight: i32) -> Result<i32, String> {
    if price < 0 || weight < 0 {
        return Err(format!(
            "price {price} and weight {weight}: neither may be negative"
        ));
    }
    let base = if price >= 10_000 { 0 } else { 399 };
    let kilograms = (i64::from(weight) + 999) / 1000;
    Ok(base + (kilograms * 125) as i32)
}

/// What the representation gave for the `@external` fields.
#[derive(Debug, Clone, Copy, Default)]
struct Inputs {
    price: Option<i32>,
    weight: Option<i32>,
}

/// A product's stock and shipping.
pub struct Product {
    upc: String,
    units: u32,
    inputs: Inputs,
}

#[Object]
impl Product {
    async fn upc(&self) -> ID {
        ID(self.upc.clone())
    }
    // Owned by products; here only as the gateway sends it for `shippingEstimate`.
    // (Comments, not GraphQL descriptions: the supergraph takes a field's description
    // from the subgraph that owns it.)
    #[graphql(external)]
    async fn price(&self) -> Result<i32> {
        self.inputs.price.ok_or_else(|| missing("price").into())
    }
    #[graphql(external)]
    async fn weight(&self) -> Result<i32> {
        self.inputs.weight.ok_or_else(|| missing("weight").into())
    }
    /// Units in the warehouse.
    #[graphql(cache_control(max_age = 5))]
    async fn quantity(&self) -> i32 {
        self.units as i32
    }
    #[graphql(cache_control(max_age = 5))]
    async fn in_stock(&self) -> bool {
        self.units > 0
    }
    /// Shipping one unit, in cents, from the product's price and weight.
    #[graphql(requires = "price weight", cache_control(max_age = 60))]
    async fn shipping_estimate(&self) -> Result<i32> {
        let price = self.inputs.price.ok_or_else(|| missing("price"))?;
        let weight = self.inputs.weight.ok_or_else(|| missing("weight"))?;
        Ok(shipping_estimate(price, weight)?)
    }
}

fn missing(field: &str) -> String {
    format!(
        "the representation has no {field}: shippingEstimate @requires the product's \
         price and weight"
    )
}

pub struct Query;

#[Object]
impl Query {
    /// The first `first` products with no units left, in catalog order.
    async fn out_of_stock(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 10)] first: i32,
    ) -> Result<Vec<Product>> {
        let stock = read::<Stock>(ctx);
        let n = first_n(Some(first), stock.scale.products as usize)?;
        Ok((0..stock.scale.products)
            .filter(|&i| stock.units(i) == 0)
            .take(n)
            .map(|i| stock.product(i, Inputs::default()))
            .collect())
    }

    /// A product by `upc`; `price` and `weight` are the `@requires` inputs.
    #[graphql(entity)]
    async fn find_product_by_upc(
        &self,
        ctx: &Context<'_>,
        #[graphql(key)] upc: ID,
        price: Option<i32>,
        weight: Option<i32>,
    ) -> Option<Product> {
        let stock = read::<Stock>(ctx);
        let index = stock.scale.product_by_upc(&upc)?;
        Some(stock.product(index, Inputs { price, weight }))
    }
}

pub struct Mutation;

#[Object(cache_control(no_cache))]
impl Mutation {
    /// Add `quantity` units (1 to 1,000,000) to a product's stock; an unknown UPC is an
    /// error.
    async fn restock(&self, ctx: &Context<'_>, upc: ID, quantity: i32) -> Result<Product> {
        if !(1..=MAX_RESTOCK).contains(&quantity) {
            return Err(format!("quantity {quantity}: restock 1 to {MAX_RESTOCK} units").into());
        }
        let mut stock = write::<Stock>(ctx);
        let index = stock
            .scale
            .product_by_upc(&upc)
            .ok_or_else(|| format!("no product with upc {:?}", upc.as_str()))?;
        let units = stock
            .units(index)
            .saturating_add(quantity as u32)
            .min(i32::MAX as u32);
        stock.units.insert(index, units);
        Ok(stock.product(index, Inputs::default()))
    }
}

pub type Schema = async_graphql::Schema<Query, Mutation, EmptySubscription>;

/// The inventory subgraph over `stock`, validating as `mode` says.
pub fn schema(stock: Store, mode: ValidationMode) -> Schema {
    crate::federated(Query, Mutation, stock, mode)
}

/// A fresh store over the data set at `scale`.
pub fn store(scale: Scale) -> Store {
    Arc::new(RwLock::new(Stock::new(scale)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipping_from_price_and_weight() {
        assert_eq!(shipping_estimate(500, 2500), Ok(399 + 3 * 125));
        assert_eq!(shipping_estimate(15_000, 2500), Ok(3 * 125));
        assert_eq!(shipping_estimate(9_999, 1000), Ok(399 + 125));
        assert_eq!(shipping_estimate(10_000, 1001), Ok(250));
        assert_eq!(shipping_estimate(0, 0), Ok(399));
        assert!(shipping_estimate(-1, 10).is_err());
        assert!(shipping_estimate(10, -1).is_err());
    }
}
