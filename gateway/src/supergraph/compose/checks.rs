//! The end of composition: every problem the planner would meet, found and listed
//! before a supergraph is written. A field nobody resolves, an `@external` field no
//! subgraph resolves, an unknown type, a field several subgraphs define without
//! `@shareable`, and an entity field that a subgraph returning the entity cannot
//! reach because the two share no key it can provide.

use std::collections::HashSet;

use indexmap::IndexMap;

use super::{Composed, Composer, CompositionError, Kind, TypeDef, MUTATION, QUERY};
use crate::supergraph::{base_name, Subgraph, SubgraphId};

impl Composer {
    pub(super) fn finish(mut self, subgraphs: &[Subgraph]) -> Result<Composed, CompositionError> {
        if !self.query_type_seen {
            self.problems
                .push("no subgraph defines a Query type".to_string());
        }
        for (ty, field, id) in std::mem::take(&mut self.externals) {
            let known = self.types.get(&ty).and_then(|t| match &t.kind {
                Kind::Object(o) => o.fields.get(&field),
                _ => None,
            });
            if known.is_none_or(|f| f.owners.is_empty()) {
                self.problems.push(format!(
                    "{ty}.{field} is @external in subgraph {} but no subgraph resolves it",
                    subgraphs[id].name
                ));
            }
        }
        let known_types: HashSet<&str> = self
            .types
            .keys()
            .map(String::as_str)
            .chain(["String", "Int", "Float", "Boolean", "ID"])
            .collect();
        let name_of = |id: SubgraphId| subgraphs[id].name.as_str();
        for t in self.types.values() {
            let Kind::Object(object) = &t.kind else {
                continue;
            };
            let is_root = t.name == QUERY || t.name == MUTATION;
            for f in object.fields.values() {
                let base = base_name(&f.ty);
                if !known_types.contains(base) {
                    self.problems
                        .push(format!("{}.{}: unknown type {base}", t.name, f.name));
                }
                for arg in &f.args {
                    let base = base_name(&arg.ty);
                    if !known_types.contains(base) {
                        self.problems.push(format!(
                            "{}.{}({}): unknown type {base}",
                            t.name, f.name, arg.name
                        ));
                    }
                }
                if f.owners.is_empty() {
                    self.problems
                        .push(format!("{}.{} is resolved by no subgraph", t.name, f.name));
                    continue;
                }
                let unshared =
                    f.owners.len() > 1 && f.owners.iter().any(|o| !f.shareable_in.contains(o));
                let value_type = object.keys.is_empty() && !is_root;
                if unshared && !value_type {
                    let owners: Vec<&str> = f.owners.iter().map(|&o| name_of(o)).collect();
                    self.problems.push(format!(
                        "{}.{} is defined by several subgraphs ({}) without @shareable",
                        t.name,
                        f.name,
                        owners.join(", ")
                    ));
                }
            }
            if is_root {
                continue;
            }
            // Every subgraph that can return this type must be able to hand the planner
            // the keys that the owners of its other fields accept.
            for &source in &object.defined_in {
                if !returns_type(&self.types, source, &t.name) {
                    continue;
                }
                for f in object.fields.values() {
                    if f.owners.is_empty() || f.is_owned_by(source) {
                        continue;
                    }
                    let reachable = f.owners.iter().any(|&o| {
                        object.key_for(o).is_some_and(|key| {
                            key.iter().all(|k| {
                                object
                                    .fields
                                    .get(k)
                                    .is_some_and(|kf| kf.is_owned_by(source))
                            })
                        })
                    });
                    if !reachable {
                        self.problems.push(format!(
                            "{}.{} (resolved by {}) cannot be fetched for a {} returned by subgraph {}: they share no @key that {} can provide",
                            t.name,
                            f.name,
                            f.owners.iter().map(|&o| name_of(o)).collect::<Vec<_>>().join(", "),
                            t.name,
                            name_of(source),
                            name_of(source),
                        ));
                    }
                }
            }
        }
        if !self.problems.is_empty() {
            return Err(CompositionError(self.problems));
        }
        Ok(Composed {
            types: self.types,
            mutation: self.mutation_type_seen,
        })
    }
}

/// Whether subgraph `id` has some field whose type is `ty` (so it can hand out such objects).
fn returns_type(types: &IndexMap<String, TypeDef>, id: SubgraphId, ty: &str) -> bool {
    types.values().any(|t| match &t.kind {
        Kind::Object(o) => o
            .fields
            .values()
            .any(|f| f.is_owned_by(id) && base_name(&f.ty) == ty),
        _ => false,
    })
}
