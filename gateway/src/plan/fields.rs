//! Which fields a selection set selects: fragments flattened, `@skip`/`@include`
//! applied, and fields that share a response key merged, in query order.
//!
//! The `@skip`/`@include` conditions are the only part of a document whose effect
//! depends on variables. [`Conditions`] names the variables they read, so that a plan
//! can be kept per combination of their values.

use std::collections::{BTreeSet, HashMap};

use async_graphql::Variables;
use async_graphql_parser::types::{
    Directive, ExecutableDocument, Field, FragmentDefinition, OperationDefinition, Selection,
    SelectionSet,
};
use async_graphql_parser::Positioned;
use async_graphql_value::{ConstValue, Name, Value};

/// The parts of a client document that decide which fields are selected: its
/// fragments, and the variables `@skip`/`@include` and arguments refer to.
#[derive(Clone, Copy)]
pub struct DocumentView<'a> {
    pub fragments: &'a HashMap<Name, Positioned<FragmentDefinition>>,
    pub variables: &'a Variables,
    pub operation: &'a OperationDefinition,
}

/// Fields sharing one response key: the first one, and every selection set to merge.
pub struct Merged<'d> {
    pub key: &'d str,
    pub field: &'d Field,
    pub sets: Vec<&'d SelectionSet>,
}

impl<'a> DocumentView<'a> {
    /// The value of a variable: as sent, else the operation's default, else null.
    pub fn variable(&self, name: &Name) -> ConstValue {
        if let Some(v) = self.variables.get(name) {
            return v.clone();
        }
        self.operation
            .variable_definitions
            .iter()
            .find(|d| &d.node.name.node == name)
            .and_then(|d| d.node.default_value().cloned())
            .unwrap_or(ConstValue::Null)
    }

    fn constant(&self, value: &Value) -> ConstValue {
        value
            .clone()
            .into_const_with(|name| Ok::<_, std::convert::Infallible>(self.variable(&name)))
            .unwrap_or(ConstValue::Null)
    }

    fn skipped(&self, directives: &[Positioned<Directive>]) -> bool {
        directives.iter().any(|d| {
            let condition = || d.node.get_argument("if").map(|v| self.constant(&v.node));
            match d.node.name.node.as_str() {
                "skip" => matches!(condition(), Some(ConstValue::Boolean(true))),
                "include" => matches!(condition(), Some(ConstValue::Boolean(false))),
                _ => false,
            }
        })
    }

    /// The fields of `set` that apply to an object for which `applies` accepts a
    /// fragment's type condition (every condition, inside introspection answers),
    /// fragments flattened and `@skip`/`@include` applied. Validation has already
    /// rejected fragment cycles, so the recursion ends.
    pub fn collect_fields<'d>(
        &self,
        applies: &dyn Fn(&str) -> bool,
        set: &'d SelectionSet,
        out: &mut Vec<&'d Field>,
    ) where
        'a: 'd,
    {
        for selection in &set.items {
            match &selection.node {
                Selection::Field(f) => {
                    if !self.skipped(&f.node.directives) {
                        out.push(&f.node);
                    }
                }
                Selection::FragmentSpread(spread) => {
                    if self.skipped(&spread.node.directives) {
                        continue;
                    }
                    if let Some(fragment) = self.fragments.get(&spread.node.fragment_name.node) {
                        if applies(&fragment.node.type_condition.node.on.node) {
                            self.collect_fields(applies, &fragment.node.selection_set.node, out);
                        }
                    }
                }
                Selection::InlineFragment(inline) => {
                    if self.skipped(&inline.node.directives) {
                        continue;
                    }
                    let condition = inline.node.type_condition.as_ref();
                    if condition.is_none_or(|c| applies(&c.node.on.node)) {
                        self.collect_fields(applies, &inline.node.selection_set.node, out);
                    }
                }
            }
        }
    }

    /// The fields of every set in `sets`, merged by response key in the order each
    /// key first appears (GraphQL's field merging). Linear in the number of fields.
    pub fn merged<'d>(
        &self,
        applies: &dyn Fn(&str) -> bool,
        sets: &[&'d SelectionSet],
    ) -> Vec<Merged<'d>>
    where
        'a: 'd,
    {
        let mut fields = Vec::new();
        for set in sets {
            self.collect_fields(applies, set, &mut fields);
        }
        let mut out: Vec<Merged<'d>> = Vec::with_capacity(fields.len());
        // Small objects are searched linearly, which beats hashing.
        let mut index: Option<HashMap<&'d str, usize>> =
            (fields.len() > 16).then(|| HashMap::with_capacity(fields.len()));
        for field in fields {
            let key = field.response_key().node.as_str();
            let at = match &index {
                Some(index) => index.get(key).copied(),
                None => out.iter().position(|m| m.key == key),
            };
            match at {
                Some(i) => out[i].sets.push(&field.selection_set.node),
                None => {
                    if let Some(index) = &mut index {
                        index.insert(key, out.len());
                    }
                    out.push(Merged {
                        key,
                        field,
                        sets: vec![&field.selection_set.node],
                    });
                }
            }
        }
        out
    }
}

/// The variables an operation's `@skip`/`@include` read: a plan is kept per
/// combination of their values.
#[derive(Debug, Default)]
pub struct Conditions {
    names: Vec<Name>,
}

impl Conditions {
    /// Every variable named in an `if:` of `@skip`/`@include` in `op` or in any
    /// fragment of `doc` (a superset of those `op` reaches, which costs nothing).
    pub fn of(doc: &ExecutableDocument, op: &OperationDefinition) -> Conditions {
        let mut names = BTreeSet::new();
        scan(&op.selection_set.node, &mut names);
        for fragment in doc.fragments.values() {
            directive_variables(&fragment.node.directives, &mut names);
            scan(&fragment.node.selection_set.node, &mut names);
        }
        Conditions {
            names: names.into_iter().collect(),
        }
    }

    /// The plan key of one request: bit i is the value of the i-th variable. `None`
    /// when there are more than 64 (then plans are not kept).
    pub fn key(&self, view: &DocumentView<'_>) -> Option<u64> {
        if self.names.len() > 64 {
            return None;
        }
        Some(self.names.iter().enumerate().fold(
            0u64,
            |bits, (i, name)| match view.variable(name) {
                ConstValue::Boolean(true) => bits | (1 << i),
                _ => bits,
            },
        ))
    }
}

fn scan(set: &SelectionSet, names: &mut BTreeSet<Name>) {
    for item in &set.items {
        match &item.node {
            Selection::Field(f) => {
                directive_variables(&f.node.directives, names);
                scan(&f.node.selection_set.node, names);
            }
            Selection::FragmentSpread(s) => directive_variables(&s.node.directives, names),
            Selection::InlineFragment(i) => {
                directive_variables(&i.node.directives, names);
                scan(&i.node.selection_set.node, names);
            }
        }
    }
}

fn directive_variables(directives: &[Positioned<Directive>], names: &mut BTreeSet<Name>) {
    for d in directives {
        if matches!(d.node.name.node.as_str(), "skip" | "include") {
            if let Some(Value::Variable(name)) = d.node.get_argument("if").map(|v| &v.node) {
                names.insert(name.clone());
            }
        }
    }
}
