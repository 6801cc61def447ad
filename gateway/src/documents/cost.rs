//! Demand control: an operation's estimated cost, from the sizes of the lists it asks
//! for, known before any fetch.
//!
//! The weights are those of IBM's GraphQL cost specification as Apollo Router applies
//! them: each object (or interface or union) value in the answer costs 1, a leaf 0, a
//! mutation's root field 10; a list multiplies what it holds by its size. A list's
//! size is, in order:
//!
//! 1. with `@listSize` in the supergraph ([`crate::supergraph::list_size`]): the
//!    largest value given to one of its slicing arguments, else its assumed size;
//! 2. the value of a size argument, `first`, `last`, `count` or `limit` (sent, or the
//!    argument's default in the schema);
//! 3. `--list-size`.
//!
//! A size read from a variable is that request's value, so an estimate that reads a
//! variable is made again per request ([`Estimate::fixed`] says whether it did).
//! `@skip` and `@include` are not applied, and every type condition of an abstract
//! field is summed: the estimate is an upper bound for every value of the variables.
//! Each fragment's cost is computed once (a fragment's cost does not depend on where
//! it is spread, outside a `sizedFields` parent), so the estimate is linear in the
//! document's size, which admission has bounded.

use std::collections::HashMap;

use async_graphql::Variables;
use async_graphql_parser::types::{
    BaseType, ExecutableDocument, Field, OperationDefinition, OperationType, Selection,
    SelectionSet, Type,
};
use async_graphql_value::{ConstValue, Value};

use crate::supergraph::{FieldDef, Supergraph};

/// Arguments read as a list's size when no `@listSize` names its own.
const SIZE_ARGUMENTS: [&str; 4] = ["first", "last", "count", "limit"];

/// An operation's estimated cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    pub cost: u64,
    /// Whether the estimate holds for every request of the operation (it read no
    /// variable).
    pub fixed: bool,
}

/// Estimate `op` of `doc` with this request's `variables`; `default_size` is the size
/// of a list nothing else sizes.
pub fn estimate(
    doc: &ExecutableDocument,
    op: &OperationDefinition,
    variables: &Variables,
    supergraph: &Supergraph,
    default_size: u64,
) -> Estimate {
    let (root, root_weight) = match op.ty {
        OperationType::Query => (supergraph.query_type.as_str(), None),
        OperationType::Mutation => match supergraph.mutation_type.as_deref() {
            Some(t) => (t, Some(10)),
            None => {
                return Estimate {
                    cost: 0,
                    fixed: true,
                }
            }
        },
        OperationType::Subscription => {
            return Estimate {
                cost: 0,
                fixed: true,
            }
        }
    };
    let mut walk = Walk {
        doc,
        variables,
        supergraph,
        default_size,
        fragments: HashMap::new(),
        fixed: true,
    };
    let cost = walk.set(&op.selection_set.node, root, root_weight, None);
    Estimate {
        cost,
        fixed: walk.fixed,
    }
}

struct Walk<'a> {
    doc: &'a ExecutableDocument,
    variables: &'a Variables,
    supergraph: &'a Supergraph,
    default_size: u64,
    /// Each fragment's cost, once computed.
    fragments: HashMap<&'a str, u64>,
    fixed: bool,
}

/// The size a `sizedFields` parent gives its named children.
type Sized<'s> = Option<(&'s [String], u64)>;

impl<'a> Walk<'a> {
    /// The cost of `set` on type `on`. `weight`: what each field of it costs itself
    /// when it is not a leaf (`None`: the usual 1 for objects, 0 for leaves; the
    /// mutation root gives 10 to every field).
    fn set(
        &mut self,
        set: &'a SelectionSet,
        on: &'a str,
        weight: Option<u64>,
        sized: Sized<'_>,
    ) -> u64 {
        let mut total: u64 = 0;
        for item in &set.items {
            let cost = match &item.node {
                Selection::Field(f) => self.field(&f.node, on, weight, sized),
                Selection::InlineFragment(i) => {
                    let on = i
                        .node
                        .type_condition
                        .as_ref()
                        .map_or(on, |c| c.node.on.node.as_str());
                    self.set(&i.node.selection_set.node, on, weight, sized)
                }
                Selection::FragmentSpread(s) => {
                    self.fragment(s.node.fragment_name.node.as_str(), weight, sized)
                }
            };
            total = total.saturating_add(cost);
        }
        total
    }

    fn fragment(&mut self, name: &'a str, weight: Option<u64>, sized: Sized<'_>) -> u64 {
        let memo = weight.is_none() && sized.is_none();
        if memo {
            if let Some(cost) = self.fragments.get(name) {
                return *cost;
            }
        }
        // Admission refused unknown fragments and cycles before this runs.
        let Some(fragment) = self.doc.fragments.get(name) else {
            return 0;
        };
        let fragment = &fragment.node;
        let on = fragment.type_condition.node.on.node.as_str();
        let cost = self.set(&fragment.selection_set.node, on, weight, sized);
        if memo {
            self.fragments.insert(name, cost);
        }
        cost
    }

    fn field(
        &mut self,
        field: &'a Field,
        on: &'a str,
        weight: Option<u64>,
        sized: Sized<'_>,
    ) -> u64 {
        let name = field.name.node.as_str();
        let Some(def) = self.supergraph.field(on, name) else {
            // `__typename`, and introspection's fields, cost nothing.
            return 0;
        };
        let base = crate::supergraph::base_name(&def.ty);
        let composite = self.supergraph.is_composite(base);
        let own = weight.unwrap_or(if composite { 1 } else { 0 });
        let levels = list_levels(&def.ty);
        // With `sizedFields`, the size is the named children's, not this field's.
        let gives_size = def
            .list_size
            .as_ref()
            .is_some_and(|ls| !ls.sized_fields.is_empty());
        // A size is read (and a variable it names counted) only where one is used.
        let size = if levels > 0 || gives_size {
            self.size(field, def)
        } else {
            1
        };
        let (own_size, children_sized) = match &def.list_size {
            Some(ls) if gives_size => (1, Some((&ls.sized_fields[..], size))),
            _ => (size, None),
        };
        let inner = if composite {
            self.set(&field.selection_set.node, base, None, children_sized)
        } else {
            0
        };
        let size = match sized {
            Some((names, parent_size)) if names.iter().any(|n| n == name) => parent_size,
            _ => own_size,
        };
        let each = own.saturating_add(inner);
        (0..levels).fold(each, |cost, _| cost.saturating_mul(size))
    }

    /// The size of `field`'s list: its `@listSize` slicing argument or assumed size,
    /// else a size argument, else the default.
    fn size(&mut self, field: &Field, def: &FieldDef) -> u64 {
        if let Some(ls) = &def.list_size {
            let sliced = ls
                .slicing_arguments
                .iter()
                .filter_map(|a| self.argument(field, def, a))
                .max();
            if let Some(size) = sliced.or(ls.assumed) {
                return size;
            }
        }
        SIZE_ARGUMENTS
            .iter()
            .filter_map(|a| self.argument(field, def, a))
            .max()
            .unwrap_or(self.default_size)
    }

    /// The whole-number value of argument `name` of `field`: as sent (a variable's
    /// value from this request), else its default in the schema.
    fn argument(&mut self, field: &Field, def: &FieldDef, name: &str) -> Option<u64> {
        let sent = field
            .arguments
            .iter()
            .find(|(n, _)| n.node.as_str() == name)
            .map(|(_, v)| &v.node);
        let value = match sent {
            Some(Value::Variable(var)) => {
                self.fixed = false;
                self.variables.get(var).cloned()
            }
            Some(v) => v.clone().into_const(),
            None => def
                .args
                .iter()
                .find(|a| a.name == name)
                .and_then(|a| a.default.clone()),
        };
        match value? {
            ConstValue::Number(n) => n.as_u64().or_else(|| n.as_i64().map(|_| 0)),
            _ => None,
        }
    }
}

/// How many list levels `ty` has (`[[T!]]!` has two).
fn list_levels(ty: &Type) -> u32 {
    match &ty.base {
        BaseType::Named(_) => 0,
        BaseType::List(inner) => 1 + list_levels(inner),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supergraph::{Kind, ObjectDef};

    fn cost(text: &str, variables: serde_json::Value) -> Estimate {
        let sdl = r#"
            type Query { topPosts(count: Int = 5): [Post] me: User feed: Feed }
            type Mutation { like(pid: ID!): Post }
            type Post { pid: ID title: String author: User }
            type User { id: ID posts(first: Int): [Post] friends: [User] }
            type Feed { edges: [Post] total: Int }
        "#;
        let mut sg = crate::supergraph::from_public_sdl(sdl);
        let feed = match &mut sg.types.get_mut("Query").unwrap().kind {
            Kind::Object(ObjectDef { fields, .. }) => fields.get_mut("feed").unwrap(),
            _ => unreachable!(),
        };
        feed.list_size = Some(crate::supergraph::list_size::ListSize {
            assumed: Some(7),
            slicing_arguments: vec![],
            sized_fields: vec!["edges".into()],
        });
        let doc = async_graphql_parser::parse_query(text).unwrap();
        let op = crate::documents::operation(&doc, None).unwrap();
        let vars = Variables::from_json(variables);
        estimate(&doc, op, &vars, &sg, 10)
    }

    #[test]
    fn lists_multiply_by_their_size() {
        // topPosts(count: 3): 3 × (post 1 + author 1) = 6; me: 1.
        let e = cost(
            "{ topPosts(count: 3) { pid author { id } } me { id } }",
            serde_json::json!({}),
        );
        assert_eq!(
            e,
            Estimate {
                cost: 7,
                fixed: true
            }
        );
        // The argument's default in the schema (5), and --list-size (10) for friends.
        let e = cost(
            "{ topPosts { author { friends { id } } } }",
            serde_json::json!({}),
        );
        assert_eq!(e.cost, 5 * (1 + 1 + 10));
        // A size from a variable: made again per request.
        let e = cost(
            "query($n: Int) { me { posts(first: $n) { title } } }",
            serde_json::json!({"n": 4}),
        );
        assert_eq!(
            e,
            Estimate {
                cost: 1 + 4,
                fixed: false
            }
        );
    }

    #[test]
    fn fragments_nested_amplification_and_mutations() {
        let e = cost(
            "{ topPosts(count: 3) { ...P } } fragment P on Post { author { posts(first: 3) { author { id } } } }",
            serde_json::json!({}),
        );
        // 3 × (1 + author 1 + 3 × (1 + 1)) = 3 × 8.
        assert_eq!(e.cost, 24);
        let mut deep = String::from("{ topPosts(count: 3) { author { id } } }");
        for _ in 0..12 {
            deep = deep.replacen(
                "author { id }",
                "author { posts(first: 3) { author { id } } }",
                1,
            );
        }
        assert!(cost(&deep, serde_json::json!({})).cost > 500_000);
        let e = cost(
            "mutation { like(pid: \"p1\") { pid author { id } } }",
            serde_json::json!({}),
        );
        assert_eq!(e.cost, 10 + 1);
    }

    #[test]
    fn sized_fields_take_their_parents_size() {
        // feed: @listSize(assumedSize: 7, sizedFields: ["edges"]): 1 + 7 × (1 + 1).
        let e = cost(
            "{ feed { total edges { author { id } } } }",
            serde_json::json!({}),
        );
        assert_eq!(e.cost, 1 + 7 * 2);
    }
}
