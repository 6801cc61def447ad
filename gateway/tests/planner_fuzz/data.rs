//! The planner fuzzer's data set, drawn from a fixed seed, and the value of every field
//! of [`super::graph`] over it. This is the one place that says what the graph's answers
//! are: the federated subgraphs and the monolithic reference both resolve each field
//! here, so a difference between their answers can only come from federation: the plan,
//! the representations the gateway sends, and how it merges what comes back.

use async_graphql::{Name, Value};
use indexmap::IndexMap;
use rand::rngs::ChaCha8Rng;
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};

/// The data set's seed: the data never change, only the operations do.
pub const DATA_SEED: u64 = 20;

/// One object of the data set: its concrete type and row (`Query` has one row).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ref {
    pub ty: &'static str,
    pub row: usize,
}

/// A field's value: a leaf (or null), an object, or a list.
#[derive(Clone, Debug)]
pub enum Out {
    Leaf(Value),
    Object(Ref),
    List(Vec<Out>),
}

pub type Args = IndexMap<Name, Value>;

pub struct Person {
    pub id: String,
    pub handle: String,
    pub name: String,
    pub email: Option<String>,
    pub born: i64,
}

pub struct Book {
    pub id: String,
    pub name: String,
    pub format: &'static str,
    pub pages: i64,
    pub weight: i64,
    pub author: usize,
    pub sequel: Option<usize>,
}

pub struct Film {
    pub id: String,
    pub name: String,
    pub runtime: i64,
    pub director: Option<usize>,
}

pub struct Copy {
    pub shelf: String,
    pub serial: i64,
    pub book: usize,
    pub condition: &'static str,
    pub available: bool,
}

pub struct Review {
    pub id: String,
    pub stars: i64,
    pub body: String,
    pub author: usize,
    pub subject: Ref,
}

/// The whole data set.
pub struct Data {
    pub people: Vec<Person>,
    pub books: Vec<Book>,
    pub films: Vec<Film>,
    pub copies: Vec<Copy>,
    pub reviews: Vec<Review>,
}

const FIRST: &[&str] = &["Ada", "Brook", "Cyd", "Dee", "Eli", "Fay", "Gus"];
const LAST: &[&str] = &["Ames", "Birch", "Cole", "Dunn", "Eck"];
const WORDS: &[&str] = &[
    "river", "glass", "north", "paper", "quiet", "ember", "salt", "orbit", "lantern", "moss",
];
const FORMATS: &[&str] = &["HARDCOVER", "PAPERBACK", "EBOOK"];
const CONDITIONS: &[&str] = &["MINT", "GOOD", "WORN"];

fn title(rng: &mut ChaCha8Rng) -> String {
    let a = WORDS.choose(rng).expect("words");
    let b = WORDS.choose(rng).expect("words");
    format!("The {a} {b}")
}

impl Data {
    /// The data set of [`DATA_SEED`].
    pub fn seeded() -> Data {
        let mut rng = ChaCha8Rng::seed_from_u64(DATA_SEED);
        let people: Vec<Person> = (0..6)
            .map(|i| {
                let first = FIRST[i % FIRST.len()];
                let last = LAST.choose(&mut rng).expect("names");
                Person {
                    id: format!("p{}", i + 1),
                    handle: format!("{}{}", first.to_lowercase(), i + 1),
                    name: format!("{first} {last}"),
                    email: rng
                        .random_bool(0.6)
                        .then(|| format!("{}@example.org", first.to_lowercase())),
                    born: rng.random_range(1940..2005),
                }
            })
            .collect();
        let books: Vec<Book> = (0..8)
            .map(|i| Book {
                id: format!("b{}", i + 1),
                name: title(&mut rng),
                format: FORMATS.choose(&mut rng).expect("formats"),
                pages: rng.random_range(80..900),
                weight: rng.random_range(100..1500),
                author: rng.random_range(0..people.len()),
                sequel: (i + 1 < 8 && rng.random_bool(0.4)).then_some(i + 1),
            })
            .collect();
        let films: Vec<Film> = (0..5)
            .map(|i| Film {
                id: format!("f{}", i + 1),
                name: title(&mut rng),
                runtime: rng.random_range(70..190),
                director: rng
                    .random_bool(0.75)
                    .then(|| rng.random_range(0..people.len())),
            })
            .collect();
        let mut copies = Vec::new();
        let mut serials = [0i64; 3];
        for book in 0..books.len() {
            for _ in 0..rng.random_range(0..=3) {
                let shelf = rng.random_range(0..serials.len());
                serials[shelf] += 1;
                copies.push(Copy {
                    shelf: ["A", "B", "C"][shelf].to_string(),
                    serial: serials[shelf],
                    book,
                    condition: CONDITIONS.choose(&mut rng).expect("conditions"),
                    available: rng.random_bool(0.6),
                });
            }
        }
        let reviews: Vec<Review> = (0..14)
            .map(|i| {
                let subject = if rng.random_bool(0.55) {
                    Ref {
                        ty: "Book",
                        row: rng.random_range(0..books.len()),
                    }
                } else {
                    Ref {
                        ty: "Film",
                        row: rng.random_range(0..films.len()),
                    }
                };
                Review {
                    id: format!("r{}", i + 1),
                    stars: rng.random_range(1..=5),
                    body: format!("{} {}", title(&mut rng), WORDS.choose(&mut rng).expect("w")),
                    author: rng.random_range(0..people.len()),
                    subject,
                }
            })
            .collect();
        Data {
            people,
            books,
            films,
            copies,
            reviews,
        }
    }

    /// How many rows type `ty` has.
    pub fn rows(&self, ty: &str) -> usize {
        match ty {
            "Query" => 1,
            "Person" => self.people.len(),
            "Book" => self.books.len(),
            "Film" => self.films.len(),
            "Copy" => self.copies.len(),
            "Review" => self.reviews.len(),
            _ => 0,
        }
    }

    /// The ids of object type `ty`'s rows (none for a type without ids).
    pub fn ids_of(&self, ty: &str) -> Vec<String> {
        match ty {
            "Person" => self.people.iter().map(|p| p.id.clone()).collect(),
            "Book" => self.books.iter().map(|b| b.id.clone()).collect(),
            "Film" => self.films.iter().map(|f| f.id.clone()).collect(),
            "Review" => self.reviews.iter().map(|r| r.id.clone()).collect(),
            _ => Vec::new(),
        }
    }

    /// Every id of the data set, and one that names nothing.
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = ["Person", "Book", "Film", "Review"]
            .iter()
            .flat_map(|ty| self.ids_of(ty))
            .collect();
        ids.push("x9".into());
        ids
    }

    /// The row of `ty` whose fields `key` (a flat field set) equal `given`'s.
    pub fn find(&self, ty: &'static str, key: &str, given: &Args) -> Option<usize> {
        let fields: Vec<&str> = key.split_whitespace().collect();
        (0..self.rows(ty)).find(|&row| {
            fields.iter().all(|f| {
                let Out::Leaf(mine) = self.field(Ref { ty, row }, f, &Args::new()) else {
                    return false;
                };
                given.get(*f).is_some_and(|v| same_leaf(v, &mine))
            })
        })
    }

    /// The value of `field` of `on`, with `args` (defaults applied). A `@requires`
    /// field is computed from the row's own inputs here; [`Data::required`] computes
    /// it from inputs given.
    pub fn field(&self, on: Ref, field: &str, args: &Args) -> Out {
        let int = |name: &str| match args.get(name) {
            Some(Value::Number(n)) => n.as_i64(),
            _ => None,
        };
        let row = on.row;
        match (on.ty, field) {
            ("Query", "people") => objects("Person", 0..self.people.len()),
            ("Query", "person") => self.by_id("Person", args),
            ("Query", "items") => {
                let n = self.books.len().max(self.films.len());
                Out::List(
                    (0..n)
                        .flat_map(|i| {
                            let book = (i < self.books.len()).then_some(("Book", i));
                            let film = (i < self.films.len()).then_some(("Film", i));
                            book.into_iter().chain(film)
                        })
                        .map(|(ty, row)| Out::Object(Ref { ty, row }))
                        .collect(),
                )
            }
            ("Query", "item") => match self.by_id("Book", args) {
                Out::Leaf(Value::Null) => self.by_id("Film", args),
                found => found,
            },
            ("Query", "books") => {
                let format = match args.get("format") {
                    Some(Value::Enum(e)) => Some(e.to_string()),
                    _ => None,
                };
                objects(
                    "Book",
                    (0..self.books.len())
                        .filter(|&b| format.as_deref().is_none_or(|f| self.books[b].format == f)),
                )
            }
            ("Query", "picks") => objects(
                "Book",
                (0..self.books.len()).filter(|&b| self.books[b].pages > 400),
            ),
            ("Query", "copies") => {
                let condition = match args.get("condition") {
                    Some(Value::Enum(e)) => Some(e.to_string()),
                    _ => None,
                };
                objects(
                    "Copy",
                    (0..self.copies.len()).filter(|&c| {
                        condition
                            .as_deref()
                            .is_none_or(|k| self.copies[c].condition == k)
                    }),
                )
            }
            ("Query", "reviews") => objects("Review", first(0..self.reviews.len(), int("first"))),
            ("Query", "review") => self.by_id("Review", args),
            ("Query", "films") => objects("Film", 0..self.films.len()),
            ("Query", "film") => self.by_id("Film", args),

            ("Person", "id") => string(&self.people[row].id),
            ("Person", "handle") => string(&self.people[row].handle),
            ("Person", "name") => string(&self.people[row].name),
            ("Person", "email") => Out::Leaf(
                self.people[row]
                    .email
                    .as_ref()
                    .map_or(Value::Null, |e| Value::String(e.clone())),
            ),
            ("Person", "born") => Out::Leaf(Value::from(self.people[row].born)),
            ("Person", "books") => objects(
                "Book",
                (0..self.books.len()).filter(|&b| self.books[b].author == row),
            ),
            ("Person", "directed") => objects(
                "Film",
                (0..self.films.len()).filter(|&f| self.films[f].director == Some(row)),
            ),
            ("Person", "reviews") => {
                let min = int("minStars");
                objects(
                    "Review",
                    (0..self.reviews.len()).filter(|&r| {
                        let review = &self.reviews[r];
                        review.author == row && min.is_none_or(|m| review.stars >= m)
                    }),
                )
            }

            ("Book", "id") => string(&self.books[row].id),
            ("Book", "name") => string(&self.books[row].name),
            ("Book", "format") => enum_value(self.books[row].format),
            ("Book", "pages") => Out::Leaf(Value::from(self.books[row].pages)),
            ("Book", "weight") => Out::Leaf(Value::from(self.books[row].weight)),
            ("Book", "author") => object_at("Person", Some(self.books[row].author)),
            ("Book", "sequel") => object_at("Book", self.books[row].sequel),
            ("Book", "copies") => objects(
                "Copy",
                (0..self.copies.len()).filter(|&c| self.copies[c].book == row),
            ),
            ("Book", "shippingCost") => self
                .required(on.ty, field, &|input| match self.field(on, input, args) {
                    Out::Leaf(v) => Some(v),
                    _ => None,
                })
                .expect("a book's own inputs"),
            ("Book", "stock") => Out::Leaf(Value::from(
                self.copies
                    .iter()
                    .filter(|c| c.book == row && c.available)
                    .count() as i64,
            )),
            ("Book", "reviews") | ("Film", "reviews") => objects(
                "Review",
                first(
                    (0..self.reviews.len()).filter(|&r| self.reviews[r].subject == on),
                    int("first"),
                ),
            ),

            ("Film", "id") => string(&self.films[row].id),
            ("Film", "name") => string(&self.films[row].name),
            ("Film", "runtime") => Out::Leaf(Value::from(self.films[row].runtime)),
            ("Film", "director") => object_at("Person", self.films[row].director),
            ("Film", "score") => {
                let stars: Vec<i64> = self
                    .reviews
                    .iter()
                    .filter(|r| r.subject == on)
                    .map(|r| r.stars)
                    .collect();
                Out::Leaf(if stars.is_empty() {
                    Value::Null
                } else {
                    Value::from(stars.iter().sum::<i64>() as f64 / stars.len() as f64)
                })
            }

            ("Copy", "shelf") => string(&self.copies[row].shelf),
            ("Copy", "serial") => Out::Leaf(Value::from(self.copies[row].serial)),
            ("Copy", "condition") => enum_value(self.copies[row].condition),
            ("Copy", "available") => Out::Leaf(Value::from(self.copies[row].available)),

            ("Review", "id") => string(&self.reviews[row].id),
            ("Review", "stars") => Out::Leaf(Value::from(self.reviews[row].stars)),
            ("Review", "body") => string(&self.reviews[row].body),
            ("Review", "author") => object_at("Person", Some(self.reviews[row].author)),
            ("Review", "subject") => Out::Object(self.reviews[row].subject),

            (ty, f) => panic!("the data set has no field {ty}.{f}"),
        }
    }

    /// A `@requires` field from its inputs (`input(name)`, `None` if not given): the
    /// subgraph that owns it passes what came in the representation.
    pub fn required(
        &self,
        ty: &str,
        field: &str,
        input: &dyn Fn(&str) -> Option<Value>,
    ) -> Result<Out, String> {
        let get = |name: &str| input(name).ok_or_else(|| format!("{ty}.{field}: no input {name}"));
        match (ty, field) {
            ("Book", "shippingCost") => {
                let weight = match get("weight")? {
                    Value::Number(n) => n.as_i64().ok_or("weight is not an integer")?,
                    other => return Err(format!("weight is {other}")),
                };
                let format = match get("format")? {
                    Value::Enum(e) => e.to_string(),
                    Value::String(s) => s,
                    other => return Err(format!("format is {other}")),
                };
                let cost = match format.as_str() {
                    "EBOOK" => 0,
                    "HARDCOVER" => 4 + weight / 100,
                    _ => 2 + weight / 150,
                };
                Ok(Out::Leaf(Value::from(cost)))
            }
            _ => Err(format!("{ty}.{field} is not a @requires field")),
        }
    }

    fn by_id(&self, ty: &'static str, args: &Args) -> Out {
        object_at(ty, self.find(ty, "id", args))
    }
}

/// Whether two leaves are the same value, an enum equal to its name as a string (a
/// representation's values arrive as JSON).
pub fn same_leaf(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Enum(e), Value::String(s)) | (Value::String(s), Value::Enum(e)) => e.as_str() == s,
        _ => a == b,
    }
}

fn string(s: &str) -> Out {
    Out::Leaf(Value::String(s.to_string()))
}

fn enum_value(name: &str) -> Out {
    Out::Leaf(Value::Enum(Name::new(name)))
}

fn objects(ty: &'static str, rows: impl Iterator<Item = usize>) -> Out {
    Out::List(rows.map(|row| Out::Object(Ref { ty, row })).collect())
}

fn object_at(ty: &'static str, row: Option<usize>) -> Out {
    match row {
        Some(row) => Out::Object(Ref { ty, row }),
        None => Out::Leaf(Value::Null),
    }
}

/// The first `n` of `rows` (all when `n` is null, none when it is negative).
fn first(rows: impl Iterator<Item = usize>, n: Option<i64>) -> impl Iterator<Item = usize> {
    rows.take(n.map_or(usize::MAX, |n| n.max(0) as usize))
}
