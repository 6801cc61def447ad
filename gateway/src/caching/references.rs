//! References of cached pieces: `Type:key` for every entity in a value.
//!
//! The planner asks every subgraph object of an entity type for its `__typename`
//! and its key fields under reserved `_gw_k_*` aliases, so an entry's references can
//! be read off its value: `User:u1`, `Post:p1`. A mutation's result names the
//! entities it touched the same way, and they are invalidated.

use crate::answer::tape::{Kind, Value};
use crate::supergraph::KEY_ALIAS_PREFIX;

/// `Type:key` for every object in `value` that came with its `__typename` and key
/// fields (several key fields are joined with commas), each once, in order.
pub fn collect(value: Value<'_>, out: &mut Vec<String>) {
    match value.kind() {
        Kind::Object => {
            if let Some(ty) = value.get("__typename").and_then(|t| t.as_str()) {
                let mut key = String::new();
                for member in value.members() {
                    if member.key().starts_with(KEY_ALIAS_PREFIX) {
                        if !key.is_empty() {
                            key.push(',');
                        }
                        match member.as_str() {
                            Some(s) => key.push_str(&s),
                            None => key.push_str(&String::from_utf8_lossy(member.raw())),
                        }
                    }
                }
                if !key.is_empty() {
                    let reference = format!("{ty}:{key}");
                    if !out.contains(&reference) {
                        out.push(reference);
                    }
                }
            }
            for member in value.members() {
                collect(member, out);
            }
        }
        Kind::Array => value.items().for_each(|item| collect(item, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::tape::Tape;

    #[test]
    fn references_come_from_typename_and_keys() {
        let tape = Tape::parse(bytes::Bytes::from_static(
            br#"{"me":{"name":"John","__typename":"User","_gw_k_id":"u1","topPosts":[{"pid":"p1","__typename":"Post","_gw_k_pid":"p1"}],"n":{"__typename":"N","_gw_k_a":1,"_gw_k_b":"x"}}}"#,
        ))
        .unwrap();
        let mut refs = Vec::new();
        collect(tape.root(), &mut refs);
        assert_eq!(refs, ["User:u1", "Post:p1", "N:1,x"]);
    }
}
