//! An entity's representation: what of an object of the response an entity fetch
//! sends its subgraph (`__typename`, key fields, the inputs of `@requires`), written
//! as JSON from the object's view, and the type its answers name.
//!
//! The requirement is the planner's selection (`requires`), projected onto the view
//! as the response writer reads it: a scalar from the first answer that has it,
//! objects and lists merged, inline fragments applied by the object's type.

use std::borrow::Cow;

use hive_router_query_planner::ast::selection_item::SelectionItem;

use super::{Data, Nodes};
use crate::answer::tape::Kind;
use crate::supergraph::Supergraph;

impl Data {
    /// The representation of the object `view` for an entity fetch that requires
    /// `requires` (`__typename`, key fields, `@requires` inputs), as JSON appended to
    /// `out`, and the object's type as its answers name it ([`Data::typename`]);
    /// `None`, with `out` as it was, when the object has none of the fields.
    pub fn representation<'s>(
        &'s self,
        view: &Nodes,
        requires: &[SelectionItem],
        supergraph: &Supergraph,
        out: &mut Vec<u8>,
    ) -> Option<Option<Cow<'s, str>>> {
        let start = out.len();
        let named = self.typename(view, supergraph);
        // An object type's answer may come without `__typename` (the fetch that would
        // have asked for it was skipped): its requirement's type condition names it.
        let ty = named.clone().or_else(|| {
            requires.iter().find_map(|i| match i {
                SelectionItem::InlineFragment(f)
                    if supergraph.fields_of(&f.type_condition).is_some()
                        && !supergraph.is_abstract(&f.type_condition) =>
                {
                    Some(Cow::Borrowed(f.type_condition.as_str()))
                }
                _ => None,
            })
        });
        out.push(b'{');
        let mut first = true;
        if let Some(t) = &ty {
            out.extend_from_slice(b"\"__typename\":");
            json_string(out, t);
            first = false;
        }
        let mut wrote = false;
        self.project(
            view,
            requires,
            ty.as_deref(),
            supergraph,
            out,
            &mut first,
            &mut wrote,
        );
        let only_typename = requires
            .iter()
            .all(|i| matches!(i, SelectionItem::Field(f) if f.name == "__typename"));
        if !(wrote || only_typename && ty.is_some()) {
            out.truncate(start);
            return None;
        }
        out.push(b'}');
        Some(named)
    }

    /// Write the members of `requires` found in `view` (an object of type `ty`);
    /// `first` says whether the object has no member yet, `wrote` is set when one
    /// is written.
    #[allow(clippy::too_many_arguments)]
    fn project(
        &self,
        view: &Nodes,
        requires: &[SelectionItem],
        ty: Option<&str>,
        supergraph: &Supergraph,
        out: &mut Vec<u8>,
        first: &mut bool,
        wrote: &mut bool,
    ) {
        for item in requires {
            match item {
                SelectionItem::Field(f) => {
                    if f.name == "__typename" {
                        continue;
                    }
                    let key = f.selection_identifier();
                    let (mut values, mut null) = self.member(view, &f.name);
                    if values.is_empty() && !null && key != f.name {
                        (values, null) = self.member(view, key);
                    }
                    if values.is_empty() && !null {
                        continue;
                    }
                    let before = out.len();
                    if !*first {
                        out.push(b',');
                    }
                    json_string(out, key);
                    out.push(b':');
                    if values.is_empty() {
                        out.extend_from_slice(b"null");
                    } else if !self.projected(&values, &f.selections.items, supergraph, out) {
                        out.truncate(before);
                        continue;
                    }
                    *first = false;
                    *wrote = true;
                }
                SelectionItem::InlineFragment(i) => {
                    let applies = ty.is_none_or(|t| {
                        supergraph.satisfies(t, &i.type_condition)
                            || supergraph.satisfies(&i.type_condition, t)
                    });
                    if applies {
                        self.project(view, &i.selections.items, ty, supergraph, out, first, wrote);
                    }
                }
                // The planner writes requirements without fragment spreads.
                SelectionItem::FragmentSpread(_) => {}
            }
        }
    }

    /// Write the value at `values` projected onto `selection` (as it is, for a
    /// leaf); false when nothing of it could be written.
    fn projected(
        &self,
        values: &Nodes,
        selection: &[SelectionItem],
        supergraph: &Supergraph,
        out: &mut Vec<u8>,
    ) -> bool {
        let Some(first) = values.first() else {
            out.extend_from_slice(b"null");
            return true;
        };
        let value = self.value(first);
        match value.kind() {
            Kind::Array => {
                out.push(b'[');
                for (i, item) in self.elements(values).enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    if !self.projected(&item, selection, supergraph, out) {
                        out.extend_from_slice(b"null");
                    }
                }
                out.push(b']');
                true
            }
            Kind::Object if !selection.is_empty() => {
                let view = self.view_of(values);
                let ty = self.typename(&view, supergraph);
                let start = out.len();
                out.push(b'{');
                let mut first = true;
                if let Some(t) = &ty {
                    out.extend_from_slice(b"\"__typename\":");
                    json_string(out, t);
                    first = false;
                }
                let mut wrote = false;
                self.project(
                    &view,
                    selection,
                    ty.as_deref(),
                    supergraph,
                    out,
                    &mut first,
                    &mut wrote,
                );
                if !wrote {
                    out.truncate(start);
                    return false;
                }
                out.push(b'}');
                true
            }
            _ => {
                out.extend_from_slice(value.raw());
                true
            }
        }
    }
}

/// `s` as a JSON string: a GraphQL name (`[_A-Za-z0-9]`, as keys and type names are)
/// written as it is, anything else escaped by serde_json.
fn json_string(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b == b'_' || b.is_ascii_alphanumeric()) {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        let _ = serde_json::to_writer(&mut *out, s);
    }
}
