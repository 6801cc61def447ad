//! Checks a parsed document must pass before async-graphql validates it, each one
//! linear in the document's size: fragments that exist and do not spread themselves,
//! and the counts of fields, aliases, root fields and fragment uses once every
//! fragment is expanded; reserved names.
//!
//! **Why here, and why linear.** async-graphql's depth and complexity checks walk
//! every expansion of every fragment spread, so a document of a few dozen bytes whose
//! fragments spread each other twice (`fragment A on Query { ...B ...B }`, and so on)
//! asks for 2^n steps, and a fragment that spreads itself for an endless walk. Such a
//! walk is synchronous: no request timeout can stop it. So this module never expands
//! a fragment. It orders the fragments so that each comes after every fragment it
//! spreads (refusing an unknown fragment or a cycle on the way, with an explicit
//! stack rather than recursion), and sums each fragment's expanded counts once, from
//! the sums of the fragments it spreads. Each selection set is read once, so the work
//! is bounded by the document's size, which [`super::lexical`] bounded before the
//! parser ran. What async-graphql walks afterwards is bounded by the counts refused
//! here: expanded fields, and expanded spreads and inline fragments, each at most
//! `--max-fields`.
//!
//! `@skip` and `@include` do not reduce any count: a document is admitted for every
//! value of its variables.

use std::collections::HashMap;

use async_graphql_parser::types::{ExecutableDocument, Selection, SelectionSet};

use super::limits::DocumentLimits;

/// Names the gateway keeps for its own subgraph requests: key aliases
/// (`_gw_k_id`) and the variables of entity batches (`$_gw_r0`).
const RESERVED: &str = "_gw_";

/// Why a document is refused before async-graphql sees it.
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal(pub String);

/// What a selection set holds once its fragments are expanded.
#[derive(Debug, Clone, Copy, Default)]
struct Expanded {
    fields: u64,
    aliases: u64,
    /// Fields at the set's own level (through spreads and inline fragments).
    roots: u64,
    /// Fragment spreads and inline fragments.
    fragments: u64,
}

impl Expanded {
    fn add(&mut self, other: Expanded, at_root: bool) {
        self.fields = self.fields.saturating_add(other.fields);
        self.aliases = self.aliases.saturating_add(other.aliases);
        self.fragments = self.fragments.saturating_add(other.fragments);
        if at_root {
            self.roots = self.roots.saturating_add(other.roots);
        }
    }
}

/// Admit `doc` under `limits`, or say why not. Every operation of the document is
/// checked, whichever the request names.
pub fn admit(doc: &ExecutableDocument, limits: &DocumentLimits) -> Result<(), Refusal> {
    let mut sizes: HashMap<&str, Expanded> = HashMap::with_capacity(doc.fragments.len());
    for name in fragment_order(doc)? {
        let fragment = &doc.fragments[name].node;
        let size = expand(&fragment.selection_set.node, &sizes)?;
        sizes.insert(name, size);
    }
    for (_, op) in doc.operations.iter() {
        let op = &op.node;
        let size = expand(&op.selection_set.node, &sizes)?;
        let max_fields = limits.max_fields as u64;
        if size.fields > max_fields {
            return Err(Refusal(format!(
                "the operation selects {} fields (fragments expanded); the limit is {max_fields} (--max-fields)",
                size.fields
            )));
        }
        if size.fragments > max_fields {
            return Err(Refusal(format!(
                "the operation expands {} fragment spreads and inline fragments; the limit is {max_fields} (--max-fields)",
                size.fragments
            )));
        }
        if size.roots > limits.max_root_fields as u64 {
            return Err(Refusal(format!(
                "the operation has {} root fields; the limit is {} (--max-root-fields)",
                size.roots, limits.max_root_fields
            )));
        }
        if let Some(max) = limits.max_aliases {
            if size.aliases > max as u64 {
                return Err(Refusal(format!(
                    "the operation has {} aliases (fragments expanded); the limit is {max} (--max-aliases)",
                    size.aliases
                )));
            }
        }
        for def in &op.variable_definitions {
            let name = &def.node.name.node;
            if name.starts_with(RESERVED) {
                return Err(Refusal(format!(
                    "the variable ${name} is reserved: variables starting with {RESERVED} belong to the gateway"
                )));
            }
        }
    }
    Ok(())
}

/// The expanded counts of `set`, reading each spread's from `sizes` (which holds
/// every fragment `set` spreads, by the order [`fragment_order`] gives). Recursion
/// follows the set's own nesting, which the text's nesting limit bounds.
fn expand(set: &SelectionSet, sizes: &HashMap<&str, Expanded>) -> Result<Expanded, Refusal> {
    let mut total = Expanded::default();
    for item in &set.items {
        match &item.node {
            Selection::Field(f) => {
                let f = &f.node;
                let inner = expand(&f.selection_set.node, sizes)?;
                let mut own = Expanded {
                    fields: 1,
                    roots: 1,
                    ..Expanded::default()
                };
                if let Some(alias) = &f.alias {
                    if alias.node.starts_with(crate::supergraph::KEY_ALIAS_PREFIX) {
                        return Err(Refusal(format!(
                            "the alias {} is reserved: aliases starting with {} belong to the gateway",
                            alias.node,
                            crate::supergraph::KEY_ALIAS_PREFIX
                        )));
                    }
                    own.aliases = 1;
                }
                own.add(inner, false);
                total.add(own, true);
            }
            Selection::InlineFragment(i) => {
                let mut inner = expand(&i.node.selection_set.node, sizes)?;
                inner.fragments = inner.fragments.saturating_add(1);
                total.add(inner, true);
            }
            Selection::FragmentSpread(s) => {
                let name = s.node.fragment_name.node.as_str();
                let Some(size) = sizes.get(name) else {
                    return Err(unknown(name));
                };
                let mut size = *size;
                size.fragments = size.fragments.saturating_add(1);
                total.add(size, true);
            }
        }
    }
    Ok(total)
}

fn unknown(name: &str) -> Refusal {
    Refusal(format!("Unknown fragment \"{name}\""))
}

/// The document's fragments, each after every fragment it spreads; an unknown
/// fragment or a cycle is refused. A depth-first walk with its own stack (a chain of
/// fragments as long as the document allows cannot overflow the thread's).
fn fragment_order(doc: &ExecutableDocument) -> Result<Vec<&str>, Refusal> {
    let mut spreads: HashMap<&str, Vec<&str>> = HashMap::with_capacity(doc.fragments.len());
    for (name, fragment) in &doc.fragments {
        let mut out = Vec::new();
        spreads_of(&fragment.node.selection_set.node, &mut out);
        spreads.insert(name.as_str(), out);
    }
    // Sorted, so that which cycle is named does not depend on hashing.
    let mut names: Vec<&str> = spreads.keys().copied().collect();
    names.sort_unstable();
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        OnPath,
        Done,
    }
    let mut marks: HashMap<&str, Mark> = HashMap::with_capacity(names.len());
    let mut order = Vec::with_capacity(names.len());
    for start in names {
        if marks.contains_key(start) {
            continue;
        }
        marks.insert(start, Mark::OnPath);
        let mut path: Vec<(&str, usize)> = vec![(start, 0)];
        while let Some((node, next)) = path.last_mut() {
            let node: &str = node;
            let children = &spreads[node];
            let Some(&child) = children.get(*next) else {
                marks.insert(node, Mark::Done);
                order.push(node);
                path.pop();
                continue;
            };
            *next += 1;
            match marks.get(child) {
                Some(Mark::Done) => {}
                Some(Mark::OnPath) => {
                    let from = path.iter().position(|(n, _)| *n == child).unwrap_or(0);
                    let mut cycle: Vec<&str> = path[from..].iter().map(|(n, _)| *n).collect();
                    cycle.push(child);
                    return Err(Refusal(format!(
                        "Cannot spread fragment \"{child}\" within itself ({})",
                        cycle.join(" → ")
                    )));
                }
                None if !spreads.contains_key(child) => return Err(unknown(child)),
                None => {
                    marks.insert(child, Mark::OnPath);
                    path.push((child, 0));
                }
            }
        }
    }
    Ok(order)
}

/// The fragments `set` spreads, at any depth, in order.
fn spreads_of<'d>(set: &'d SelectionSet, out: &mut Vec<&'d str>) {
    for item in &set.items {
        match &item.node {
            Selection::Field(f) => spreads_of(&f.node.selection_set.node, out),
            Selection::InlineFragment(i) => spreads_of(&i.node.selection_set.node, out),
            Selection::FragmentSpread(s) => out.push(s.node.fragment_name.node.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitted(text: &str) -> Result<(), String> {
        let doc = async_graphql_parser::parse_query(text).expect("parses");
        admit(&doc, &DocumentLimits::default()).map_err(|r| r.0)
    }

    #[test]
    fn cycles_are_refused_whatever_their_length() {
        let e = admitted("query { ...A } fragment A on Query { ...A ...A }").unwrap_err();
        assert!(e.contains("within itself (A → A)"), "{e}");
        let e = admitted(
            "{ ...A } fragment A on Query { a { ...B } } fragment B on Query { b ...C } fragment C on Query { ... on Query { ...A } }",
        )
        .unwrap_err();
        assert!(e.contains("(A → B → C → A)"), "{e}");
    }

    #[test]
    fn unknown_fragments_are_refused_even_unused() {
        let e = admitted("{ a } fragment A on Query { ...Nowhere }").unwrap_err();
        assert_eq!(e, "Unknown fragment \"Nowhere\"");
        let e = admitted("{ ...Nowhere }").unwrap_err();
        assert_eq!(e, "Unknown fragment \"Nowhere\"");
    }

    #[test]
    fn expanded_counts_multiply_along_chains() {
        // F0 has 1 field; each Fi spreads F(i-1) twice: F20 expands to 2^20 fields.
        let mut text = String::from("{ ...F20 } fragment F0 on Query { a }");
        for i in 1..=20 {
            text.push_str(&format!(
                " fragment F{i} on Query {{ ...F{} ...F{} }}",
                i - 1,
                i - 1
            ));
        }
        let e = admitted(&text).unwrap_err();
        assert!(e.contains("selects 1048576 fields"), "{e}");
    }

    #[test]
    fn fragment_uses_count_where_they_are_expanded() {
        // A chain of spreads with one field at its end: few fields, many expansions.
        let mut text = String::from("{ ");
        text.push_str(&"...F0 ".repeat(1500));
        text.push('}');
        for i in 0..10 {
            text.push_str(&format!(" fragment F{i} on Query {{ ...F{} }}", i + 1));
        }
        text.push_str(" fragment F10 on Query { a }");
        let e = admitted(&text).unwrap_err();
        assert!(e.contains("expands 16500 fragment spreads"), "{e}");
    }

    #[test]
    fn aliases_and_roots_are_counted() {
        let doc = async_graphql_parser::parse_query(
            "{ x: a y: a ...A } fragment A on Query { z: a b { w: c } }",
        )
        .unwrap();
        let limits = DocumentLimits {
            max_aliases: Some(3),
            ..DocumentLimits::default()
        };
        let e = admit(&doc, &limits).unwrap_err().0;
        assert!(e.contains("4 aliases"), "{e}");
        let limits = DocumentLimits {
            max_root_fields: 3,
            ..DocumentLimits::default()
        };
        let e = admit(&doc, &limits).unwrap_err().0;
        assert!(e.contains("4 root fields"), "{e}");
    }
}
