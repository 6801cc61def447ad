//! The planner fuzzer's graph, described once as data: an audit-style library of people,
//! books, films, physical copies and reviews, split over five subgraphs. Both executors
//! are built from this one description ([`super::subgraphs`]: the federated subgraphs and
//! their SDL; [`super::reference`]: one monolithic schema), and the operation generator
//! ([`super::operations`]) walks its public view.
//!
//! What it exercises:
//! - an interface, `Item`, implemented by `Book` (owned by `catalog`) and `Film` (owned
//!   by `studio`), declared in both;
//! - a union, `Subject = Book | Film`, declared whole in `reviews` over stubs of types
//!   owned elsewhere, and partially (`Book` alone) in `catalog`;
//! - enums: `Format` (an output in two subgraphs) and `Condition` (an output and an
//!   argument);
//! - keys: `Person` has two (`id` in `catalog` and `studio`, `handle` in `reviews`, both
//!   in `accounts`, so reaching `studio` from `reviews` means a key change), `Copy` a
//!   composite one (`shelf serial`);
//! - `@requires`: `Book.shippingCost` in `inventory` needs `weight` and `format` from
//!   `catalog`;
//! - `@provides`: `Review.author` in `reviews` provides `name`, which `accounts` owns;
//! - `@shareable`: `Person.name` (`accounts`, and provided by `reviews`) and `Film.name`
//!   (`catalog` and `studio`);
//! - arguments with and without defaults, nullable fields that are null for some rows,
//!   and lists at every level.

/// The subgraphs, in the order the supergraph lists them.
pub const SUBGRAPHS: &[&str] = &["accounts", "catalog", "inventory", "reviews", "studio"];

/// How a subgraph holds a field.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Home {
    /// Resolves it (a key field, or a field only it has).
    Owns,
    /// Resolves it, `@shareable`: another subgraph resolves it too, to the same value.
    Shares,
    /// `@external`: declared for a `@requires` or `@provides`, never resolved here
    /// unless the value came in with the entity or was provided.
    External,
    /// Resolves it from these fields, `@external` here, sent in the representation.
    Requires(&'static str),
    /// Resolves it, and can also give these fields of the object it returns.
    Provides(&'static str),
}

/// An argument: name, GraphQL type, and default (a GraphQL literal).
#[derive(Clone, Copy, Debug)]
pub struct Arg {
    pub name: &'static str,
    pub ty: &'static str,
    pub default: Option<&'static str>,
}

/// A field of an object type, with every subgraph that declares it.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub name: &'static str,
    /// Its GraphQL type, e.g. `[Review!]!`.
    pub ty: &'static str,
    pub args: &'static [Arg],
    pub homes: &'static [(&'static str, Home)],
}

#[derive(Clone, Copy, Debug)]
pub struct Object {
    pub name: &'static str,
    pub implements: &'static [&'static str],
    /// `@key`s: subgraph and field set, in the order each subgraph declares them.
    pub keys: &'static [(&'static str, &'static str)],
    pub fields: &'static [Field],
}

#[derive(Clone, Copy, Debug)]
pub struct Interface {
    pub name: &'static str,
    /// Name and type of each field; every subgraph that declares it declares them all.
    pub fields: &'static [(&'static str, &'static str)],
    pub subgraphs: &'static [&'static str],
}

#[derive(Clone, Copy, Debug)]
pub struct Union {
    pub name: &'static str,
    /// Per subgraph that declares it, the members it lists.
    pub members: &'static [(&'static str, &'static [&'static str])],
}

#[derive(Clone, Copy, Debug)]
pub struct Enum {
    pub name: &'static str,
    pub values: &'static [&'static str],
    pub subgraphs: &'static [&'static str],
}

const fn arg(name: &'static str, ty: &'static str, default: Option<&'static str>) -> Arg {
    Arg { name, ty, default }
}

const fn field(
    name: &'static str,
    ty: &'static str,
    homes: &'static [(&'static str, Home)],
) -> Field {
    Field {
        name,
        ty,
        args: &[],
        homes,
    }
}

const fn field_with(
    name: &'static str,
    ty: &'static str,
    args: &'static [Arg],
    homes: &'static [(&'static str, Home)],
) -> Field {
    Field {
        name,
        ty,
        args,
        homes,
    }
}

use Home::*;

pub const OBJECTS: &[Object] = &[
    Object {
        name: "Query",
        implements: &[],
        keys: &[],
        fields: &[
            field("people", "[Person!]!", &[("accounts", Owns)]),
            field_with(
                "person",
                "Person",
                &[arg("id", "ID!", None)],
                &[("accounts", Owns)],
            ),
            field("items", "[Item!]!", &[("catalog", Owns)]),
            field_with(
                "item",
                "Item",
                &[arg("id", "ID!", None)],
                &[("catalog", Owns)],
            ),
            field_with(
                "books",
                "[Book!]!",
                &[arg("format", "Format", None)],
                &[("catalog", Owns)],
            ),
            field("picks", "[Subject!]!", &[("catalog", Owns)]),
            field_with(
                "copies",
                "[Copy!]!",
                &[arg("condition", "Condition", None)],
                &[("inventory", Owns)],
            ),
            field_with(
                "reviews",
                "[Review!]!",
                &[arg("first", "Int", Some("5"))],
                &[("reviews", Owns)],
            ),
            field_with(
                "review",
                "Review",
                &[arg("id", "ID!", None)],
                &[("reviews", Owns)],
            ),
            field("films", "[Film!]!", &[("studio", Owns)]),
            field_with(
                "film",
                "Film",
                &[arg("id", "ID!", None)],
                &[("studio", Owns)],
            ),
        ],
    },
    Object {
        name: "Person",
        implements: &[],
        keys: &[
            ("accounts", "id"),
            ("accounts", "handle"),
            ("catalog", "id"),
            ("reviews", "handle"),
            ("studio", "id"),
        ],
        fields: &[
            field(
                "id",
                "ID!",
                &[("accounts", Owns), ("catalog", Owns), ("studio", Owns)],
            ),
            field(
                "handle",
                "String!",
                &[("accounts", Owns), ("reviews", Owns)],
            ),
            field(
                "name",
                "String!",
                &[("accounts", Shares), ("reviews", External)],
            ),
            field("email", "String", &[("accounts", Owns)]),
            field("born", "Int!", &[("accounts", Owns)]),
            field("books", "[Book!]!", &[("catalog", Owns)]),
            field("directed", "[Film!]!", &[("studio", Owns)]),
            field_with(
                "reviews",
                "[Review!]!",
                &[arg("minStars", "Int", None)],
                &[("reviews", Owns)],
            ),
        ],
    },
    Object {
        name: "Book",
        implements: &["Item"],
        keys: &[("catalog", "id"), ("inventory", "id"), ("reviews", "id")],
        fields: &[
            field(
                "id",
                "ID!",
                &[("catalog", Owns), ("inventory", Owns), ("reviews", Owns)],
            ),
            field("name", "String!", &[("catalog", Owns)]),
            field(
                "format",
                "Format!",
                &[("catalog", Owns), ("inventory", External)],
            ),
            field("pages", "Int!", &[("catalog", Owns)]),
            field(
                "weight",
                "Int!",
                &[("catalog", Owns), ("inventory", External)],
            ),
            field("author", "Person!", &[("catalog", Owns)]),
            field("sequel", "Book", &[("catalog", Owns)]),
            field("copies", "[Copy!]!", &[("catalog", Owns)]),
            field(
                "shippingCost",
                "Int!",
                &[("inventory", Requires("weight format"))],
            ),
            field("stock", "Int!", &[("inventory", Owns)]),
            field_with(
                "reviews",
                "[Review!]!",
                &[arg("first", "Int", None)],
                &[("reviews", Owns)],
            ),
        ],
    },
    Object {
        name: "Film",
        implements: &["Item"],
        keys: &[("catalog", "id"), ("reviews", "id"), ("studio", "id")],
        fields: &[
            field(
                "id",
                "ID!",
                &[("catalog", Owns), ("reviews", Owns), ("studio", Owns)],
            ),
            field(
                "name",
                "String!",
                &[("catalog", Shares), ("studio", Shares)],
            ),
            field("runtime", "Int!", &[("studio", Owns)]),
            field("director", "Person", &[("studio", Owns)]),
            field_with(
                "reviews",
                "[Review!]!",
                &[arg("first", "Int", None)],
                &[("reviews", Owns)],
            ),
            field("score", "Float", &[("reviews", Owns)]),
        ],
    },
    Object {
        name: "Copy",
        implements: &[],
        keys: &[("catalog", "shelf serial"), ("inventory", "shelf serial")],
        fields: &[
            field(
                "shelf",
                "String!",
                &[("catalog", Owns), ("inventory", Owns)],
            ),
            field("serial", "Int!", &[("catalog", Owns), ("inventory", Owns)]),
            field("condition", "Condition!", &[("inventory", Owns)]),
            field("available", "Boolean!", &[("inventory", Owns)]),
        ],
    },
    Object {
        name: "Review",
        implements: &[],
        keys: &[("reviews", "id")],
        fields: &[
            field("id", "ID!", &[("reviews", Owns)]),
            field("stars", "Int!", &[("reviews", Owns)]),
            field("body", "String!", &[("reviews", Owns)]),
            field("author", "Person!", &[("reviews", Provides("name"))]),
            field("subject", "Subject!", &[("reviews", Owns)]),
        ],
    },
];

pub const INTERFACES: &[Interface] = &[Interface {
    name: "Item",
    fields: &[("id", "ID!"), ("name", "String!")],
    subgraphs: &["catalog", "studio"],
}];

pub const UNIONS: &[Union] = &[Union {
    name: "Subject",
    members: &[("catalog", &["Book"]), ("reviews", &["Book", "Film"])],
}];

pub const ENUMS: &[Enum] = &[
    Enum {
        name: "Format",
        values: &["HARDCOVER", "PAPERBACK", "EBOOK"],
        subgraphs: &["catalog", "inventory"],
    },
    Enum {
        name: "Condition",
        values: &["MINT", "GOOD", "WORN"],
        subgraphs: &["inventory"],
    },
];

pub fn object(name: &str) -> Option<&'static Object> {
    OBJECTS.iter().find(|o| o.name == name)
}

pub fn interface(name: &str) -> Option<&'static Interface> {
    INTERFACES.iter().find(|i| i.name == name)
}

pub fn union(name: &str) -> Option<&'static Union> {
    UNIONS.iter().find(|u| u.name == name)
}

pub fn enumeration(name: &str) -> Option<&'static Enum> {
    ENUMS.iter().find(|e| e.name == name)
}

impl Object {
    /// Whether `subgraph` declares this type (with at least one field).
    pub fn in_subgraph(&self, subgraph: &str) -> bool {
        self.fields.iter().any(|f| f.home(subgraph).is_some())
    }
}

impl Field {
    pub fn home(&self, subgraph: &str) -> Option<Home> {
        self.homes
            .iter()
            .find(|(s, _)| *s == subgraph)
            .map(|(_, h)| *h)
    }

    /// Whether the public schema has it: some subgraph resolves it.
    pub fn public(&self) -> bool {
        self.homes.iter().any(|(_, h)| *h != External)
    }
}

impl Union {
    /// Every member any subgraph lists, each once.
    pub fn all_members(&self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        for (_, members) in self.members {
            for m in *members {
                if !out.contains(m) {
                    out.push(m);
                }
            }
        }
        out
    }
}

/// The named type at the bottom of a type's text: `[Review!]!` → `Review`.
pub fn base(ty: &str) -> &str {
    ty.trim_matches(|c| c == '[' || c == ']' || c == '!')
}

/// The object types a value of named type `ty` can be, in the public schema.
pub fn possible_types(ty: &str) -> Vec<&'static str> {
    if let Some(o) = object(ty) {
        return vec![o.name];
    }
    if let Some(u) = union(ty) {
        return u.all_members();
    }
    if interface(ty).is_some() {
        return OBJECTS
            .iter()
            .filter(|o| o.implements.contains(&ty))
            .map(|o| o.name)
            .collect();
    }
    Vec::new()
}

/// Whether a fragment on `condition` applies to an object of type `object`.
pub fn applies(condition: &str, object: &str) -> bool {
    possible_types(condition).contains(&object)
}

/// A field of the public schema: what an operation may select.
#[derive(Clone, Copy, Debug)]
pub struct PublicField {
    pub name: &'static str,
    pub ty: &'static str,
    pub args: &'static [Arg],
}

/// The fields the public schema gives composite type `ty` (none for a union).
pub fn public_fields(ty: &str) -> Vec<PublicField> {
    if let Some(o) = object(ty) {
        return o
            .fields
            .iter()
            .filter(|f| f.public())
            .map(|f| PublicField {
                name: f.name,
                ty: f.ty,
                args: f.args,
            })
            .collect();
    }
    if let Some(i) = interface(ty) {
        return i
            .fields
            .iter()
            .map(|(name, ty)| PublicField {
                name,
                ty,
                args: &[],
            })
            .collect();
    }
    Vec::new()
}

/// Whether named type `ty` has fields to select (an object, interface or union).
pub fn composite(ty: &str) -> bool {
    object(ty).is_some() || interface(ty).is_some() || union(ty).is_some()
}

/// Every composite type but `Query`, whose possible types meet `ty`'s: a fragment on
/// one of them may be spread where a `ty` is.
pub fn overlapping(ty: &str) -> Vec<&'static str> {
    let mine = possible_types(ty);
    OBJECTS
        .iter()
        .map(|o| o.name)
        .filter(|n| *n != "Query")
        .chain(INTERFACES.iter().map(|i| i.name))
        .chain(UNIONS.iter().map(|u| u.name))
        .filter(|t| possible_types(t).iter().any(|p| mine.contains(p)))
        .collect()
}
