//! A grammar-aware generator of GraphQL documents against the seed schema.
//!
//! It walks the supergraph's types (below, as data) and writes documents that are
//! valid: operations with variable definitions, aliases, arguments as literals or
//! variables, `@skip`/`@include`, named and inline fragments, `__typename` and
//! introspection, several operations picked by `operationName`. Mutations touch only
//! ids the seed data does not have, or create new users, so the seed answer stays true.
//! Each document comes with the variables it declares, drawn as valid values; the
//! caller may then replace them with arbitrary JSON ([`arbitrary_json`]).

use rand::rngs::ChaCha8Rng;
use rand::seq::IndexedRandom;
use rand::RngExt;
use serde_json::{json, Map, Value};

/// An argument's type, as the generator needs it.
#[derive(Clone, Copy)]
enum Arg {
    Int,
    NonNullInt,
    Id,
    Str,
}

/// A field of an output type: name, arguments, and the type it returns (None: a scalar).
type Field = (&'static str, &'static [(&'static str, Arg)], Option<Type>);

#[derive(Clone, Copy, PartialEq)]
enum Type {
    Query,
    Mutation,
    User,
    Post,
}

impl Type {
    fn name(self) -> &'static str {
        match self {
            Type::Query => "Query",
            Type::Mutation => "Mutation",
            Type::User => "User",
            Type::Post => "Post",
        }
    }

    fn fields(self) -> &'static [Field] {
        match self {
            Type::Query => &[
                ("me", &[], Some(Type::User)),
                ("topPosts", &[("count", Arg::Int)], Some(Type::Post)),
                ("getPost", &[("pid", Arg::Id)], Some(Type::Post)),
            ],
            Type::Mutation => &[
                ("createUser", &[("name", Arg::Str)], Some(Type::User)),
                (
                    "updateUser",
                    &[("id", Arg::Id), ("name", Arg::Str)],
                    Some(Type::User),
                ),
                (
                    "updatePostTitle",
                    &[("pid", Arg::Id), ("title", Arg::Str)],
                    Some(Type::Post),
                ),
            ],
            Type::User => &[
                ("id", &[], None),
                ("name", &[], None),
                ("topPosts", &[("count", Arg::NonNullInt)], Some(Type::Post)),
            ],
            Type::Post => &[
                ("pid", &[], None),
                ("title", &[], None),
                ("content", &[], None),
                ("author", &[], Some(Type::User)),
            ],
        }
    }
}

/// A generated request: the document, its variables and the operation to run.
pub struct Generated {
    pub document: String,
    pub variables: Map<String, Value>,
    pub operation_name: Option<String>,
}

/// Writes one document; holds what it has declared so far.
struct Writer<'r> {
    rng: &'r mut ChaCha8Rng,
    out: String,
    /// Variables of the operation being written: name, GraphQL type, a valid value.
    variables: Vec<(String, &'static str, Value)>,
    /// Named fragments to write after the operations: name, type, selection text.
    fragments: Vec<(String, Type, String)>,
    /// Writing a named fragment: no variables.
    in_fragment: bool,
}

/// A valid document with one to three operations.
pub fn document(rng: &mut ChaCha8Rng) -> Generated {
    let operations = if rng.random_bool(0.8) {
        1
    } else {
        rng.random_range(2..=3)
    };
    let mut w = Writer {
        rng,
        out: String::new(),
        variables: Vec::new(),
        fragments: Vec::new(),
        in_fragment: false,
    };
    let mut chosen = None;
    let mut chosen_variables = Map::new();
    let pick = w.rng.random_range(0..operations);
    for i in 0..operations {
        let mutation = w.rng.random_bool(0.15);
        w.variables.clear();
        let name = format!("Op{i}");
        let mut body = String::new();
        let root = if mutation {
            Type::Mutation
        } else {
            Type::Query
        };
        w.selection_set(root, 0, &mut body);
        let keyword = if mutation { "mutation" } else { "query" };
        // An anonymous shorthand query only when it is the only operation.
        if operations == 1 && !mutation && w.variables.is_empty() && w.rng.random_bool(0.3) {
            w.out.push_str(&body);
        } else {
            w.out.push_str(keyword);
            w.out.push(' ');
            w.out.push_str(&name);
            if !w.variables.is_empty() {
                w.out.push('(');
                let defs: Vec<String> = w
                    .variables
                    .iter()
                    .map(|(n, t, _)| format!("${n}: {t}"))
                    .collect();
                w.out.push_str(&defs.join(", "));
                w.out.push(')');
            }
            w.out.push(' ');
            w.out.push_str(&body);
        }
        w.out.push('\n');
        if i == pick {
            chosen = (operations > 1).then(|| name.clone());
            chosen_variables = w
                .variables
                .iter()
                .map(|(n, _, v)| (n.clone(), v.clone()))
                .collect();
        }
    }
    let fragments = std::mem::take(&mut w.fragments);
    for (name, on, selection) in fragments {
        w.out
            .push_str(&format!("fragment {name} on {} {selection}\n", on.name()));
    }
    Generated {
        document: w.out,
        variables: chosen_variables,
        operation_name: chosen,
    }
}

impl Writer<'_> {
    /// `{ ... }` for `on`, at nesting `depth`.
    fn selection_set(&mut self, on: Type, depth: usize, out: &mut String) {
        out.push_str("{ ");
        let count = self.rng.random_range(1..=3);
        for _ in 0..count {
            self.selection(on, depth, out);
            out.push(' ');
        }
        out.push('}');
    }

    fn selection(&mut self, on: Type, depth: usize, out: &mut String) {
        let roll = self.rng.random_range(0..100);
        if roll < 6 {
            out.push_str("__typename");
            return;
        }
        if roll < 9 && on == Type::Query {
            out.push_str("__schema { queryType { name } types { name kind } }");
            return;
        }
        if roll < 16 && on != Type::Mutation {
            // An inline fragment on the same type, maybe under a directive.
            out.push_str(&format!("... on {} ", on.name()));
            self.directive(out);
            self.selection_set(on, depth + 1, out);
            return;
        }
        if roll < 22 && on != Type::Mutation && self.fragments.len() < 3 {
            let name = format!("F{}", self.fragments.len());
            let mut selection = String::new();
            // A fragment may be spread by any operation: its arguments are literals.
            let was = std::mem::replace(&mut self.in_fragment, true);
            self.selection_set(on, depth + 1, &mut selection);
            self.in_fragment = was;
            self.fragments.push((name.clone(), on, selection));
            out.push_str(&format!("...{name}"));
            return;
        }
        let fields = on.fields();
        let (name, args, returns) = *fields.choose(self.rng).expect("types have fields");
        if self.rng.random_bool(0.25) {
            out.push_str(&format!("a{}: ", self.rng.random_range(0..4)));
        }
        out.push_str(name);
        if !args.is_empty() {
            let mut written = Vec::new();
            for (arg, kind) in args {
                // `count` of Query.topPosts has a default and may be left out.
                if matches!(kind, Arg::Int) && self.rng.random_bool(0.3) {
                    continue;
                }
                written.push(format!("{arg}: {}", self.argument(*kind, on)));
            }
            if !written.is_empty() {
                out.push('(');
                out.push_str(&written.join(", "));
                out.push(')');
            }
        }
        out.push(' ');
        self.directive(out);
        if let Some(returns) = returns {
            if depth >= 4 {
                // Deep enough: a scalar leaf ends it.
                out.push_str("{ __typename }");
            } else {
                self.selection_set(returns, depth + 1, out);
            }
        }
    }

    /// `@skip(if: …)` or `@include(if: …)`, sometimes.
    fn directive(&mut self, out: &mut String) {
        if self.rng.random_bool(0.12) {
            let name = if self.rng.random_bool(0.5) {
                "skip"
            } else {
                "include"
            };
            let value = if self.rng.random_bool(0.5) {
                "true"
            } else {
                "false"
            };
            out.push_str(&format!("@{name}(if: {value}) "));
        }
    }

    /// An argument value: a literal, or (in an operation) a new variable.
    fn argument(&mut self, kind: Arg, on: Type) -> String {
        let (literal, gql_type, value) = self.valid_value(kind, on);
        if !self.in_fragment && self.rng.random_bool(0.3) && self.variables.len() < 6 {
            let name = format!("v{}", self.variables.len());
            self.variables.push((name.clone(), gql_type, value));
            format!("${name}")
        } else {
            literal
        }
    }

    /// A valid value of `kind`: as a literal, its GraphQL type, and as JSON.
    fn valid_value(&mut self, kind: Arg, on: Type) -> (String, &'static str, Value) {
        match kind {
            Arg::Int | Arg::NonNullInt => {
                let n: i64 = self.rng.random_range(0..6);
                let t = if matches!(kind, Arg::Int) {
                    "Int"
                } else {
                    "Int!"
                };
                (n.to_string(), t, json!(n))
            }
            Arg::Id => {
                // Mutations only ever name ids the seed data does not have.
                let id = if on == Type::Mutation {
                    format!("x{}", self.rng.random_range(100..999))
                } else {
                    let prefix = ["p", "u"].choose(self.rng).copied().unwrap_or("p");
                    format!("{prefix}{}", self.rng.random_range(0..8))
                };
                (format!("\"{id}\""), "ID!", json!(id))
            }
            Arg::Str => {
                let s = ["fuzz", "", "é\u{1F600}", "a\\\"b", "line\\nbreak"]
                    .choose(self.rng)
                    .copied()
                    .unwrap_or("fuzz");
                let unescaped = s.replace("\\\"", "\"").replace("\\n", "\n");
                (format!("\"{s}\""), "String!", json!(unescaped))
            }
        }
    }
}

/// Arbitrary JSON: any type, nested a little, with awkward numbers and strings.
pub fn arbitrary_json(rng: &mut ChaCha8Rng, depth: usize) -> Value {
    match rng.random_range(0..if depth > 2 { 6 } else { 8 }) {
        0 => Value::Null,
        1 => json!(rng.random_bool(0.5)),
        2 => [
            json!(0),
            json!(-1),
            json!(i64::MAX),
            json!(i64::MIN),
            json!(u64::MAX),
            json!(1e308),
            json!(0.5),
            json!(2147483648_i64),
        ]
        .choose(rng)
        .cloned()
        .unwrap_or(Value::Null),
        3 => json!(rng.random_range(-5..10)),
        4 => json!(["", "p1", "u1", "\u{0}", "🙂", "x".repeat(5000).as_str()]
            .choose(rng)
            .copied()
            .unwrap_or("")),
        5 => json!(format!("{}", rng.random::<u32>())),
        6 => Value::Array(
            (0..rng.random_range(0..4))
                .map(|_| arbitrary_json(rng, depth + 1))
                .collect(),
        ),
        _ => Value::Object(
            (0..rng.random_range(0..4))
                .map(|i| (format!("k{i}"), arbitrary_json(rng, depth + 1)))
                .collect(),
        ),
    }
}
