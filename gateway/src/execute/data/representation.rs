//! An entity's representation: what of an object of the response an entity fetch
//! sends its subgraph (`__typename`, key fields, the inputs of `@requires`), written
//! as JSON from the object's view, and the type its answers name.
//!
//! The requirement is the planner's selection (`requires`), projected onto the view
//! as the response writer reads it: a scalar from the first answer that has it,
//! objects and lists merged, inline fragments applied by the object's type.
//!
//! Most representations are simpler than that: the requirement is `__typename` and
//! a few scalar fields, such as `{"__typename":"User","id":"u1"}` or, for a
//! `@requires`, `{"__typename":"Product","upc":"1","price":899,"weight":120}` from
//! two merged answers. Those are written straight from the answers' members
//! ([`Data::flat_representation`]), the same bytes at a fraction of the cost; debug
//! builds check every one against the general projection.

use std::borrow::Cow;

use hive_router_query_planner::ast::selection_item::SelectionItem;

use super::{Data, Nodes};
use crate::answer::tape::Kind;
use crate::plan::Sources;
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
        #[cfg(debug_assertions)]
        let start = out.len();
        if let Some(named) = self.flat_representation(view, requires, supergraph, out) {
            #[cfg(debug_assertions)]
            {
                let mut general = Vec::new();
                let by_view =
                    self.projected_representation(view, requires, supergraph, &mut general);
                debug_assert_eq!(by_view.as_ref(), Some(&Some(named.clone())));
                debug_assert_eq!(
                    String::from_utf8_lossy(&out[start..]),
                    String::from_utf8_lossy(&general)
                );
            }
            return Some(Some(named));
        }
        self.projected_representation(view, requires, supergraph, out)
    }

    /// The representation of the object `view` when `requires` is `__typename` and
    /// scalar fields, unaliased, alone or in one inline fragment that applies to the
    /// object's type, and the view names its type and holds a scalar or null for at
    /// least one of the fields: each field written from the first answer that holds
    /// it (what the projection writes for them, in the same order), without the
    /// projection's recursion. `None`, with `out` as it was, for anything else.
    fn flat_representation<'s>(
        &'s self,
        view: &Nodes,
        requires: &[SelectionItem],
        supergraph: &Supergraph,
        out: &mut Vec<u8>,
    ) -> Option<Cow<'s, str>> {
        let (condition, fields) = match requires {
            [SelectionItem::InlineFragment(f)] => (
                Some(f.type_condition.as_str()),
                f.selections.items.as_slice(),
            ),
            items => (None, items),
        };
        // One answer's plain `__typename` is written as it came; a merged view's
        // type is the one the answers agree on ([`Data::typename`]).
        let (named, plain) = match view.only() {
            Some(node) => {
                let typename = self.value(node).get("__typename")?;
                if typename.kind() != Kind::PlainString {
                    return None;
                }
                (typename.as_str()?, Some(typename.raw()))
            }
            None => (self.typename(view, supergraph)?, None),
        };
        if condition.is_some_and(|c| !applies(supergraph, &named, c)) {
            return None;
        }
        let start = out.len();
        out.extend_from_slice(b"{\"__typename\":");
        match plain {
            Some(raw) => out.extend_from_slice(raw),
            None => json_string(out, &named),
        }
        let mut wrote = false;
        for item in fields {
            let name = match item {
                SelectionItem::Field(f) if f.name == "__typename" => continue,
                SelectionItem::Field(f) if f.alias.is_none() && f.selections.items.is_empty() => {
                    f.name.as_str()
                }
                _ => {
                    out.truncate(start);
                    return None;
                }
            };
            // The first answer's non-null scalar; null when the answers that hold
            // it hold null; a field no answer holds is left out: the rule of
            // [`Data::member`], read in place (calling it, which builds the values'
            // list and looks up each answer's fetches, cost the deep request 2.8%
            // more instructions).
            let mut value = None;
            let mut null = false;
            for node in view.iter() {
                match self.value(node).get(name) {
                    Some(v) if v.is_null() => null = true,
                    Some(v) if matches!(v.kind(), Kind::Object | Kind::Array) => {
                        out.truncate(start);
                        return None;
                    }
                    Some(v) => {
                        value = Some(v);
                        break;
                    }
                    None => {}
                }
            }
            let raw = match value {
                Some(v) => v.raw(),
                None if null => b"null".as_slice(),
                None => continue,
            };
            out.extend_from_slice(b",\"");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":");
            out.extend_from_slice(raw);
            wrote = true;
        }
        if !wrote {
            out.truncate(start);
            return None;
        }
        out.push(b'}');
        Some(named)
    }

    /// [`Data::representation`] by projecting `requires` onto the view.
    fn projected_representation<'s>(
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
                    let (mut values, mut null) = self.member(view, &f.name, Sources::ALL);
                    if values.is_empty() && !null && key != f.name {
                        (values, null) = self.member(view, key, Sources::ALL);
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
                    if ty.is_none_or(|t| applies(supergraph, t, &i.type_condition)) {
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

/// Whether a requirement's inline fragment on `condition` applies to an object of
/// type `ty`: either type is the other or one of its own (an interface object's
/// answer names its interface). The flat and the projected representation must agree.
fn applies(supergraph: &Supergraph, ty: &str, condition: &str) -> bool {
    supergraph.satisfies(ty, condition) || supergraph.satisfies(condition, ty)
}

/// `s` as a JSON string: written as it is between quotes when no byte of it needs
/// an escape (a quote, a backslash or a control character, the bytes serde_json
/// escapes; keys and type names are GraphQL names, which never do), else escaped by
/// serde_json.
fn json_string(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    if bytes.iter().all(|&b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.reserve(bytes.len() + 2);
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
    } else {
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

#[cfg(test)]
mod tests {
    use super::json_string;
    use proptest::prelude::*;

    proptest! {
        /// Written as it is or escaped, a string comes out as serde_json writes it:
        /// control characters, quotes, backslashes, DEL and characters of two to four
        /// bytes among plain ones.
        #[test]
        fn json_string_writes_what_serde_json_writes(s in "[a-z_\\x00-\\x1f\\x7f\"\\\\é€😀]{0,12}") {
            let mut out = b"[".to_vec();
            json_string(&mut out, &s);
            let expected = serde_json::to_vec(&s).unwrap();
            prop_assert_eq!(&out[1..], expected.as_slice());
        }
    }
}
