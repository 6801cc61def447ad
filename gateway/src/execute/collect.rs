//! Walking an answer for what it still needs: the objects whose selection has
//! fields another subgraph owns, each with the representation (`__typename` and the
//! key fields the owner accepts) that `_entities` will be asked for.

use std::sync::Arc;

use crate::caching::Call;
use crate::json::{Kind, Tape, Value};
use crate::piece::Piece;
use crate::plan::{Plan, Selection, SiteId, Source};

use super::{Failure, ObjectId};

/// One object that needs an entity fetch.
pub struct EntityCall<'p> {
    pub site: SiteId,
    /// The selection the site belongs to: its fields sourced from the site are what
    /// the answer is walked for.
    pub selection: &'p Selection,
    pub object: ObjectId,
    /// `{"__typename":…,"key":…}`, or why it could not be built.
    pub representation: Result<String, Failure>,
    /// The cache's call for it, once looked up.
    pub cached: Option<Call>,
}

/// The identity of `value`'s object within a request.
pub fn object_id(tape: &Arc<Tape>, value: Value<'_>) -> ObjectId {
    (Arc::as_ptr(tape) as usize, value.index())
}

/// Push a call for every object in `value` (of `tape`, shaped by `selection`) that
/// needs an entity fetch, at any depth the same subgraph answered.
pub fn calls<'p>(
    plan: &'p Plan,
    tape: &Arc<Tape>,
    value: Value<'_>,
    selection: &'p Selection,
    out: &mut Vec<EntityCall<'p>>,
) {
    match value.kind() {
        Kind::Array => {
            for item in value.items() {
                calls(plan, tape, item, selection, out);
            }
        }
        Kind::Object => {
            for &site in &selection.sites {
                out.push(EntityCall {
                    site,
                    selection,
                    object: object_id(tape, value),
                    representation: representation(plan, site, value),
                    cached: None,
                });
            }
            for field in &selection.fields {
                if field.source != Source::Carried {
                    continue;
                }
                if let (Some(children), Some(child)) = (&field.children, value.get(&field.key)) {
                    calls(plan, tape, child, children, out);
                }
            }
        }
        _ => {}
    }
}

/// Push the calls that the entity fetched for `call` needs beneath the fields it
/// answered.
pub fn entity_fields<'p>(
    plan: &'p Plan,
    call: &EntityCall<'p>,
    piece: &Piece,
    out: &mut Vec<EntityCall<'p>>,
) {
    let Some(value) = piece.value() else {
        return;
    };
    for field in &call.selection.fields {
        if field.source != Source::Site(call.site) {
            continue;
        }
        if let (Some(children), Some(child)) = (&field.children, value.get(&field.key)) {
            calls(plan, piece.tape(), child, children, out);
        }
    }
}

/// `{"__typename":"T","k":<raw value>,…}` from the object's reserved key aliases.
fn representation(plan: &Plan, site: SiteId, object: Value<'_>) -> Result<String, Failure> {
    let site = &plan.sites[site as usize];
    let mut out = String::with_capacity(48);
    out.push_str("{\"__typename\":\"");
    out.push_str(&site.type_name);
    out.push('"');
    for (key, alias) in &site.keys {
        match object.get(alias) {
            Some(v) if !v.is_null() => {
                out.push_str(",\"");
                out.push_str(key);
                out.push_str("\":");
                // The tape checked the whole text was UTF-8.
                out.push_str(std::str::from_utf8(v.raw()).unwrap_or("null"));
            }
            _ => {
                return Err(format!(
                    "cannot fetch {}: subgraph {} returned no key field {key}",
                    site.namespace, site.source
                )
                .into())
            }
        }
    }
    out.push('}');
    Ok(out)
}
