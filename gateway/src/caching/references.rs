//! References of cached pieces: `Type:key` for every entity in a value.
//!
//! The planner asks every subgraph object of an entity type for its `__typename`
//! and its key fields under reserved `_gw_k_*` aliases, so an entry's references can
//! be read off its value: `User:u1`, `Post:p1`. A mutation's result names the
//! entities it touched the same way, and they are invalidated. An entity's own
//! fields, fetched through `_entities`, do not carry its key: their entry's own
//! reference is read off the representation it was fetched with ([`own`]).

use bytes::Bytes;

use crate::answer::tape::{Kind, Tape, Value};
use crate::plan::OwnKeys;
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

/// The references of the entity whose representation (`{"__typename":…, key fields,
/// `@requires` inputs}`) is `representation`: `Type:key` for each of `keys` (per
/// type, key field sets) whose fields it holds, written as [`collect`] writes them.
pub fn own(representation: &Bytes, keys: &[OwnKeys]) -> Vec<String> {
    let Ok(tape) = Tape::parse(representation.clone()) else {
        return Vec::new();
    };
    let value = tape.root();
    let Some(ty) = value.get("__typename").and_then(|t| t.as_str()) else {
        return Vec::new();
    };
    let Some((_, sets)) = keys.iter().find(|(t, _)| **t == *ty) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    'sets: for set in sets {
        let mut key = String::new();
        for field in set {
            let Some(v) = value.get(field) else {
                continue 'sets;
            };
            if !key.is_empty() {
                key.push(',');
            }
            match v.as_str() {
                Some(s) => key.push_str(&s),
                None => key.push_str(&String::from_utf8_lossy(v.raw())),
            }
        }
        let reference = format!("{ty}:{key}");
        if !out.contains(&reference) {
            out.push(reference);
        }
    }
    out
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

    #[test]
    fn an_entity_is_named_by_the_keys_its_representation_holds() {
        let keys: Vec<OwnKeys> = vec![
            (
                "Product".into(),
                vec![vec!["upc".into()], vec!["sku".into()]],
            ),
            ("N".into(), vec![vec!["a".into(), "b".into()]]),
        ];
        let of = |text: &'static str| own(&Bytes::from_static(text.as_bytes()), &keys);
        assert_eq!(
            of(r#"{"__typename":"Product","upc":"000000000017","price":17899,"weight":120}"#),
            ["Product:000000000017"]
        );
        assert_eq!(of(r#"{"__typename":"N","b":"x","a":1}"#), ["N:1,x"]);
        assert!(of(r#"{"__typename":"User","id":"u1"}"#).is_empty());
        assert!(of("not json").is_empty());
    }
}
