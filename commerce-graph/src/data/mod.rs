//! The commerce graph's data set: which products, users and reviews exist, and what each
//! one starts with, as pure functions of the scale flags and a seed.
//!
//! Every subgraph is started with the same flags (`--products`, `--users`,
//! `--reviews-per-product`, `--data-seed`) and reads the rows it serves from here, so
//! the four services agree without talking to each other: review `r7`'s author is the
//! same user in reviews as in accounts, product 3's seller the same in products as
//! anywhere else. Nothing is stored until a mutation changes it; a row is drawn when it
//! is read.
//!
//! Each attribute is drawn by index with SplitMix64 ([`subgraph_host::random`]): a row's
//! draws come from `draw(draw(draw(seed, stream), row), n)` for its `n`-th value, where
//! `stream` names the table (products, stock, users, wishlists, reviews). A row never
//! depends on another row, so any row can be drawn alone, in any order.
//!
//! What a row holds:
//! - product `i` (`upc(i)`, `sku(i)`): a category, a name `Adjective Material Noun`,
//!   a description, a price in cents (log-uniform from 1.99 to 999.99, ending in 99), a
//!   weight in grams (log-uniform from 50 g to 30 kg), and a seller (a user, uniform);
//! - its stock: 0 units for one product in ten, else 1 to 250 units (uniform);
//! - user `j` (`u(j+1)`): a username, a name, the day they joined (2012–2025), and a
//!   wishlist of 1 to 5 distinct products (uniform);
//! - review `r` (`r(r+1)`): of product `r / reviews_per_product`, by a user (uniform),
//!   a rating from 1 to 5 (skewed high, as shops' ratings are), a body of 3 or 4
//!   sentences, and 0 to 2 mentions of other products or users.

pub mod keys;
pub mod words;

use subgraph_host::{ids, random};
use words::Category;

/// The most products a data set may have.
pub const MAX_PRODUCTS: u32 = 10_000_000;
/// The most users a data set may have.
pub const MAX_USERS: u32 = 10_000_000;
/// The most reviews a product may start with.
pub const MAX_REVIEWS_PER_PRODUCT: u32 = 1_000;
/// The most reviews a data set may start with (`--products` × `--reviews-per-product`).
pub const MAX_REVIEWS: u64 = 100_000_000;

/// The data-set flags every commerce subgraph takes: give all four the same values.
#[derive(Debug, Clone, clap::Args)]
pub struct DataArgs {
    /// Products in the catalog: their UPCs are those of rows 1…N.
    #[arg(long, value_name = "N", default_value_t = Scale::DEFAULT.products,
          value_parser = clap::value_parser!(u32).range(1..=MAX_PRODUCTS as i64))]
    pub products: u32,
    /// Users: u1…uN. Sellers, wishlists and review authors are drawn from them.
    #[arg(long, value_name = "N", default_value_t = Scale::DEFAULT.users,
          value_parser = clap::value_parser!(u32).range(1..=MAX_USERS as i64))]
    pub users: u32,
    /// Reviews each product starts with (at most --products × this = 100,000,000 in all).
    #[arg(long, value_name = "N", default_value_t = Scale::DEFAULT.reviews_per_product,
          value_parser = clap::value_parser!(u32).range(0..=MAX_REVIEWS_PER_PRODUCT as i64))]
    pub reviews_per_product: u32,
    /// The seed every attribute of the data set is drawn with.
    #[arg(long, value_name = "SEED", default_value_t = Scale::DEFAULT.seed)]
    pub data_seed: u64,
}

impl Default for DataArgs {
    fn default() -> Self {
        let s = Scale::DEFAULT;
        DataArgs {
            products: s.products,
            users: s.users,
            reviews_per_product: s.reviews_per_product,
            data_seed: s.seed,
        }
    }
}

impl DataArgs {
    /// The scale these flags ask for, or a message naming the flags that do not fit.
    pub fn scale(&self) -> Result<Scale, String> {
        Scale::new(
            self.products,
            self.users,
            self.reviews_per_product,
            self.data_seed,
        )
    }
}

/// The size of a data set and the seed it is drawn with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    pub products: u32,
    pub users: u32,
    pub reviews_per_product: u32,
    pub seed: u64,
}

/// Which table a draw is for: each has its own stream of draws.
#[derive(Debug, Clone, Copy)]
enum Stream {
    Products = 1,
    Stock = 2,
    Users = 3,
    Wishlists = 4,
    Reviews = 5,
    Skus = 6,
}

/// The successive draws of one row.
struct Row {
    seed: u64,
    n: u64,
}

impl Row {
    fn next(&mut self) -> u64 {
        self.n += 1;
        random::draw(self.seed, self.n - 1)
    }
    fn below(&mut self, n: u64) -> u64 {
        random::below(self.next(), n)
    }
    fn pick<'a, T>(&mut self, list: &'a [T]) -> &'a T {
        &list[self.below(list.len() as u64) as usize]
    }
    /// Log-uniform from `low` to `high`.
    fn log_uniform(&mut self, low: f64, high: f64) -> f64 {
        low * (high / low).powf(random::unit(self.next()))
    }
}

/// Product `i` as the data set starts it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProductDraw {
    pub category: &'static Category,
    pub name: String,
    pub description: String,
    /// In cents.
    pub price: u32,
    /// In grams.
    pub weight: u32,
    /// The seller's user row.
    pub seller: u32,
}

/// User `j` as the data set starts them.
#[derive(Debug, Clone, PartialEq)]
pub struct UserDraw {
    pub username: String,
    pub name: String,
    /// `YYYY-MM-DD`.
    pub joined: String,
}

/// Something a review mentions: a product row or a user row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mentioned {
    Product(u32),
    User(u32),
}

/// Review `r` as the data set starts it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewDraw {
    /// The reviewed product's row.
    pub product: u32,
    /// The author's user row.
    pub author: u32,
    pub rating: u8,
    pub body: String,
    pub mentions: Vec<Mentioned>,
}

impl Default for Scale {
    fn default() -> Self {
        Scale::DEFAULT
    }
}

impl Scale {
    /// The default scale: 1,000 products, 500 users, 5 reviews per product, seed 1.
    pub const DEFAULT: Scale = Scale {
        products: 1_000,
        users: 500,
        reviews_per_product: 5,
        seed: 1,
    };

    /// A scale, or a message naming the flag that is out of range.
    pub fn new(
        products: u32,
        users: u32,
        reviews_per_product: u32,
        seed: u64,
    ) -> Result<Scale, String> {
        if !(1..=MAX_PRODUCTS).contains(&products) {
            return Err(format!(
                "--products {products}: must be 1 to {MAX_PRODUCTS}"
            ));
        }
        if !(1..=MAX_USERS).contains(&users) {
            return Err(format!("--users {users}: must be 1 to {MAX_USERS}"));
        }
        if reviews_per_product > MAX_REVIEWS_PER_PRODUCT {
            return Err(format!(
                "--reviews-per-product {reviews_per_product}: must be 0 to {MAX_REVIEWS_PER_PRODUCT}"
            ));
        }
        let reviews = u64::from(products) * u64::from(reviews_per_product);
        if reviews > MAX_REVIEWS {
            return Err(format!(
                "--products {products} × --reviews-per-product {reviews_per_product} is \
                 {reviews} reviews, more than {MAX_REVIEWS}"
            ));
        }
        Ok(Scale {
            products,
            users,
            reviews_per_product,
            seed,
        })
    }

    /// The number of reviews the data set starts with.
    pub fn reviews(&self) -> u32 {
        self.products * self.reviews_per_product
    }

    fn row(&self, stream: Stream, index: u32) -> Row {
        let table = random::draw(self.seed, stream as u64);
        Row {
            seed: random::draw(table, u64::from(index)),
            n: 0,
        }
    }

    // ---- keys ----

    pub fn upc(&self, product: u32) -> String {
        keys::upc(product)
    }

    /// The product row `upc` names, if it is one of this data set's.
    pub fn product_by_upc(&self, upc: &str) -> Option<u32> {
        keys::upc_row(upc).filter(|&i| i < self.products)
    }

    fn skus(&self) -> keys::SkuScramble {
        keys::SkuScramble::new(random::draw(self.seed, Stream::Skus as u64) as u32)
    }

    pub fn sku(&self, product: u32) -> String {
        self.skus().sku(self.category(product).code, product)
    }

    /// The product row `sku` names, if it is one of this data set's.
    pub fn product_by_sku(&self, sku: &str) -> Option<u32> {
        let (code, row) = self.skus().row(sku)?;
        (row < self.products && self.category(row).code == code).then_some(row)
    }

    pub fn user_id(&self, user: u32) -> String {
        ids::id("u", user as usize)
    }

    /// The user row `id` names, if it is one of this data set's.
    pub fn user_by_id(&self, id: &str) -> Option<u32> {
        ids::number("u", id)
            .map(|n| n - 1)
            .filter(|&j| j < self.users)
    }

    /// The user row `username` names, if it is one of this data set's.
    pub fn user_by_username(&self, username: &str) -> Option<u32> {
        let row = keys::username_row(username).filter(|&j| j < self.users)?;
        (self.username(row) == username).then_some(row)
    }

    pub fn review_id(&self, review: u32) -> String {
        ids::id("r", review as usize)
    }

    /// The review row `id` spells (any number; the caller knows how many exist).
    pub fn review_row(&self, id: &str) -> Option<u32> {
        ids::number("r", id).map(|n| n - 1)
    }

    // ---- products and stock ----

    /// Product `i`'s category (its first draw, so a SKU is checked cheaply).
    pub fn category(&self, product: u32) -> &'static Category {
        self.row(Stream::Products, product).pick(&words::CATEGORIES)
    }

    /// Product `i`'s seller (its second draw, so the per-seller index is built without
    /// drawing whole products).
    pub fn seller(&self, product: u32) -> u32 {
        let mut row = self.row(Stream::Products, product);
        row.next();
        row.below(u64::from(self.users)) as u32
    }

    pub fn product(&self, product: u32) -> ProductDraw {
        let mut row = self.row(Stream::Products, product);
        let category = row.pick(&words::CATEGORIES);
        let seller = row.below(u64::from(self.users)) as u32;
        let noun = row.pick(category.nouns);
        let adjective = row.pick(&words::ADJECTIVES);
        let material = row.pick(&words::MATERIALS);
        let use_ = row.pick(&words::USES);
        let dollars = row.log_uniform(2.0, 1000.0).floor() as u32;
        let weight = row.log_uniform(50.0, 30_000.0).round() as u32;
        ProductDraw {
            category,
            name: format!("{adjective} {material} {noun}"),
            description: format!(
                "{adjective} {} in {}, {use_}. Sold in {}.",
                noun.to_lowercase(),
                material.to_lowercase(),
                category.label
            ),
            price: dollars * 100 - 1,
            weight,
            seller,
        }
    }

    /// Units in stock of product `i` at the start.
    pub fn stock(&self, product: u32) -> u32 {
        let mut row = self.row(Stream::Stock, product);
        if row.below(10) == 0 {
            0
        } else {
            1 + row.below(250) as u32
        }
    }

    // ---- users ----

    pub fn username(&self, user: u32) -> String {
        let mut row = self.row(Stream::Users, user);
        let word = row.pick(&words::HANDLE_WORDS);
        let animal = row.pick(&words::HANDLE_ANIMALS);
        keys::username(word, animal, user)
    }

    pub fn user(&self, user: u32) -> UserDraw {
        let mut row = self.row(Stream::Users, user);
        let word = row.pick(&words::HANDLE_WORDS);
        let animal = row.pick(&words::HANDLE_ANIMALS);
        let first = row.pick(&words::FIRST_NAMES);
        let last = row.pick(&words::LAST_NAMES);
        let year = 2012 + row.below(14);
        let month = 1 + row.below(12);
        let day = 1 + row.below(28);
        UserDraw {
            username: keys::username(word, animal, user),
            name: format!("{first} {last}"),
            joined: format!("{year}-{month:02}-{day:02}"),
        }
    }

    /// User `j`'s wishlist at the start: 1 to 5 distinct product rows.
    pub fn wishlist(&self, user: u32) -> Vec<u32> {
        let mut row = self.row(Stream::Wishlists, user);
        let wanted = 1 + row.below(5) as usize;
        let mut list = Vec::with_capacity(wanted);
        // Drawing 5 from at least 1 product: a bounded number of tries, so a tiny
        // catalog gives a shorter list rather than a loop.
        for _ in 0..wanted * 4 {
            if list.len() == wanted {
                break;
            }
            let p = row.below(u64::from(self.products)) as u32;
            if !list.contains(&p) {
                list.push(p);
            }
        }
        list
    }

    // ---- reviews ----

    /// The author of review `r` (its first draw, so the per-author index is built
    /// without drawing whole reviews).
    pub fn review_author(&self, review: u32) -> u32 {
        self.row(Stream::Reviews, review)
            .below(u64::from(self.users)) as u32
    }

    /// Review `r` (below [`Scale::reviews`]).
    pub fn review(&self, review: u32) -> ReviewDraw {
        let mut row = self.row(Stream::Reviews, review);
        let author = row.below(u64::from(self.users)) as u32;
        // Ratings 1…5 with weights 4, 6, 15, 35, 40 (of 100).
        let rating = match row.below(100) {
            0..=3 => 1,
            4..=9 => 2,
            10..=24 => 3,
            25..=59 => 4,
            _ => 5,
        };
        let opening = row.pick::<&str>(&words::OPENINGS);
        let mut body = String::with_capacity(200);
        body.push_str(opening);
        for _ in 0..1 + row.below(2) {
            let middle = row.pick::<&str>(&words::MIDDLES);
            body.push(' ');
            body.push_str(middle);
        }
        let closing = row.pick::<&str>(&words::CLOSINGS);
        body.push(' ');
        body.push_str(closing);
        let mentions = (0..*row.pick(&[0, 0, 1, 1, 2]))
            .map(|_| {
                if row.below(2) == 0 {
                    Mentioned::Product(row.below(u64::from(self.products)) as u32)
                } else {
                    Mentioned::User(row.below(u64::from(self.users)) as u32)
                }
            })
            .collect();
        ReviewDraw {
            product: review / self.reviews_per_product.max(1),
            author,
            rating,
            body,
            mentions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_pure_functions_of_the_seed() {
        let a = Scale::DEFAULT;
        let b = Scale { seed: 2, ..a };
        assert_eq!(a.product(7), a.product(7));
        assert_ne!(a.product(7), b.product(7));
        assert_eq!(a.user(3), Scale::DEFAULT.user(3));
        assert_eq!(a.review(11), a.review(11));
        assert_eq!(a.review(11).author, a.review_author(11));
        assert_eq!(a.review(11).product, 2);
        assert_eq!(a.category(9).code, a.product(9).category.code);
        assert_eq!(a.seller(9), a.product(9).seller);
        assert_eq!(a.username(4), a.user(4).username);
    }

    #[test]
    fn keys_name_their_rows_in_range_only() {
        let s = Scale::DEFAULT;
        for i in [0, 1, 500, 999] {
            assert_eq!(s.product_by_upc(&s.upc(i)), Some(i));
            assert_eq!(s.product_by_sku(&s.sku(i)), Some(i));
        }
        assert_eq!(s.product_by_upc(&keys::upc(1000)), None);
        // A SKU with another category's code names nothing.
        let sku = s.sku(3);
        let other = words::CATEGORIES
            .iter()
            .find(|c| c.code != s.category(3).code)
            .unwrap();
        assert_eq!(
            s.product_by_sku(&format!("{}{}", other.code, &sku[3..])),
            None
        );
        assert_eq!(s.user_by_id("u500"), Some(499));
        assert_eq!(s.user_by_id("u501"), None);
        let name = s.username(41);
        assert_eq!(s.user_by_username(&name), Some(41));
        // The right number with the wrong words names nobody.
        let wrong = if name.starts_with("amber_") {
            name.replacen("amber_", "brisk_", 1)
        } else {
            format!("amber_{}", name.split_once('_').unwrap().1)
        };
        assert_eq!(s.user_by_username(&wrong), None);
    }

    #[test]
    fn drawn_values_stay_in_their_ranges() {
        let s = Scale::DEFAULT;
        for i in 0..s.products {
            let p = s.product(i);
            assert!(
                (199..=99_999).contains(&p.price) && p.price % 100 == 99,
                "{}",
                p.price
            );
            assert!((50..=30_000).contains(&p.weight), "{}", p.weight);
            assert!(p.seller < s.users);
            assert!(s.stock(i) <= 250);
        }
        for j in 0..s.users {
            let w = s.wishlist(j);
            assert!((1..=5).contains(&w.len()));
            assert!(w.iter().all(|&p| p < s.products));
        }
        for r in 0..s.reviews() {
            let v = s.review(r);
            assert!((1..=5).contains(&v.rating) && v.author < s.users);
            assert!(v.mentions.len() <= 2);
        }
        // Out-of-stock products are about one in ten.
        let out = (0..s.products).filter(|&i| s.stock(i) == 0).count();
        assert!((50..150).contains(&out), "{out}");
    }

    #[test]
    fn scales_out_of_range_are_refused_by_flag() {
        assert!(Scale::new(0, 1, 1, 1).unwrap_err().contains("--products"));
        assert!(Scale::new(1, 0, 1, 1).unwrap_err().contains("--users"));
        assert!(Scale::new(1, 1, 1001, 1)
            .unwrap_err()
            .contains("--reviews-per-product"));
        let e = Scale::new(MAX_PRODUCTS, 1, 11, 1).unwrap_err();
        assert!(
            e.contains("--products") && e.contains("--reviews-per-product"),
            "{e}"
        );
        assert!(Scale::new(MAX_PRODUCTS, 1, 10, 1).is_ok());
    }
}
