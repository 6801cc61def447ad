//! Key canonicalisation: equal JSON under reordering gives equal keys,
//! different values give different keys, and a custom key function can
//! replace the derivation.

use std::collections::HashMap;

use cache_core::{Cache, CacheKey, KeyHasher, KeyPart, KeyParts, Policy};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

fn key_of(value: &Value) -> CacheKey {
    CacheKey::builder("Query.t").args(value).finish()
}

/// Arbitrary JSON. Floats are never integral, so serde_json's equality
/// (which tells `1` from `1.0`) matches the key's (which does not).
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1.0e9f64..1.0e9)
            .prop_filter("non-integral", |f| f.fract() != 0.0)
            .prop_map(Value::from),
        "[a-z0-9:]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{0,5}", inner, 0..24)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Feeds a JSON value with every object's entries in a shuffled order,
/// through the public `write_map`, whatever order serde_json keeps.
struct Shuffled<'a> {
    value: &'a Value,
    seed: u64,
}

impl KeyPart for Shuffled<'_> {
    fn feed(&self, hasher: &mut KeyHasher) {
        match self.value {
            Value::Array(items) => {
                hasher.write_seq(items.iter().enumerate().map(|(i, v)| Shuffled {
                    value: v,
                    seed: mix(self.seed, i as u64),
                }))
            }
            Value::Object(map) => {
                let mut entries: Vec<(&str, Shuffled<'_>)> = map
                    .iter()
                    .enumerate()
                    .map(|(i, (k, v))| {
                        (
                            k.as_str(),
                            Shuffled {
                                value: v,
                                seed: mix(self.seed, i as u64),
                            },
                        )
                    })
                    .collect();
                // Fisher-Yates with a fixed-seed generator.
                let mut state = self.seed | 1;
                for i in (1..entries.len()).rev() {
                    state = mix(state, i as u64);
                    entries.swap(i, (state % (i as u64 + 1)) as usize);
                }
                hasher.write_map(entries.iter().map(|(k, v)| (*k, v)));
            }
            leaf => hasher.write_json(leaf),
        }
    }
}

fn mix(a: u64, b: u64) -> u64 {
    (a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .rotate_left(31)
        .wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

/// Rebuilds a value inserting each object's keys in reverse order.
fn reinserted(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(reinserted).collect()),
        Value::Object(map) => {
            let mut rebuilt = Map::new();
            for (k, v) in map.iter().rev() {
                rebuilt.insert(k.clone(), reinserted(v));
            }
            Value::Object(rebuilt)
        }
        leaf => leaf.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn keys_equal_json_in_any_key_order_gives_equal_keys(value in json_value(), seed in any::<u64>()) {
        let canonical = key_of(&value);
        prop_assert_eq!(canonical, key_of(&reinserted(&value)));
        let shuffled = CacheKey::builder("Query.t").args(&Shuffled { value: &value, seed }).finish();
        prop_assert_eq!(canonical, shuffled);
    }

    #[test]
    fn keys_different_values_give_different_keys(a in json_value(), b in json_value()) {
        prop_assume!(a != b);
        prop_assert_ne!(key_of(&a), key_of(&b));
    }

    #[test]
    fn keys_one_changed_leaf_changes_the_key(value in json_value(), replacement in json_value()) {
        let changed = json!({"wrapped": value.clone(), "extra": replacement.clone()});
        let original = json!({"wrapped": value, "extra": null});
        prop_assume!(replacement != Value::Null);
        prop_assert_ne!(key_of(&changed), key_of(&original));
    }
}

#[test]
fn keys_tag_types_and_boundaries() {
    let distinct = [
        json!("1"),
        json!(1),
        json!(1.5),
        json!(true),
        json!("true"),
        json!(null),
        json!("null"),
        json!([]),
        json!({}),
        json!([[]]),
        json!([null]),
        json!(["ab"]),
        json!(["a", "b"]),
        json!({"a": "b"}),
        json!(["a", "b"]),
        json!({"ab": ""}),
        json!({"a": {"b": 1}}),
        json!({"a": [{"b": 1}]}),
        json!(u64::MAX),
        json!(-1),
    ];
    let mut seen: HashMap<CacheKey, &Value> = HashMap::new();
    for value in &distinct {
        if let Some(previous) = seen.insert(key_of(value), value) {
            assert_eq!(previous, value, "{previous} and {value} share a key");
        }
    }
    assert_eq!(
        key_of(&json!(1)),
        key_of(&json!(1.0)),
        "a number hashes by value"
    );
    assert_eq!(key_of(&json!(0)), key_of(&json!(-0.0)));
}

#[test]
fn keys_sections_and_namespaces_are_distinct() {
    let v = json!({"id": "u1"});
    let parent = CacheKey::builder("User.posts").parent(&v).finish();
    let args = CacheKey::builder("User.posts").args(&v).finish();
    let other_ns = CacheKey::builder("User.friends").parent(&v).finish();
    let absent = CacheKey::builder("User.posts").finish();
    let null_parent = CacheKey::builder("User.posts")
        .parent(&Value::Null)
        .finish();
    let all = [parent, args, other_ns, absent, null_parent];
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert_ne!(a, b);
        }
    }
}

#[test]
fn keys_long_encodings_spill_consistently() {
    // Encodings past the 256-byte stack buffer go through the streaming
    // hasher and must stay canonical and sensitive.
    let long: Map<String, Value> = (0..40)
        .map(|i| (format!("field_{i:02}"), json!("x".repeat(i))))
        .collect();
    let long = Value::Object(long);
    assert_eq!(key_of(&long), key_of(&reinserted(&long)));
    let shuffled = CacheKey::builder("Query.t")
        .args(&Shuffled {
            value: &long,
            seed: 7,
        })
        .finish();
    assert_eq!(key_of(&long), shuffled);
    let mut changed = long.clone();
    changed["field_39"] = json!("y");
    assert_ne!(key_of(&long), key_of(&changed));
}

#[test]
fn keys_canonical_parts_match_the_builder() {
    let parent = json!({"__typename": "User", "id": "u1", "name": "Ada"});
    let args = json!({"first": 10, "after": "abc"});
    let selection = ["id", "title", "body", "createdAt", "author"];
    let built = CacheKey::builder("User.posts")
        .parent(&parent)
        .args(&args)
        .selection(&selection)
        .finish();
    let parts = KeyParts::new()
        .parent(&parent)
        .args(&args)
        .selection(&selection);
    assert_eq!(CacheKey::canonical("User.posts", &parts), built);
    let cache: Cache<u32> = Cache::builder().build();
    assert_eq!(cache.namespace("User.posts").key(&parts), built);
    // Selection order is part of the key (it shapes the response).
    let reordered = ["title", "id", "body", "createdAt", "author"];
    assert_ne!(
        CacheKey::builder("User.posts")
            .parent(&parent)
            .args(&args)
            .selection(&reordered)
            .finish(),
        built
    );
}

#[test]
fn keys_custom_key_function_replaces_the_derivation() {
    // Key on the parent's id only: selection and other fields do not matter.
    let by_id = |namespace: &str, parts: &KeyParts<'_>| {
        let mut hasher = KeyHasher::new();
        hasher.write_str(namespace);
        if let Some(parent) = parts.parent {
            parent.feed(&mut hasher);
        }
        hasher.finish()
    };
    let cache: Cache<u32> = Cache::builder().build();
    let ns = cache.namespace_with("User.avatar", Policy::new().key_function(by_id));
    let a = ns.key(&KeyParts::new().parent(&"u1").selection(&["url"]));
    let b = ns.key(&KeyParts::new().parent(&"u1").selection(&["url", "size"]));
    let c = ns.key(&KeyParts::new().parent(&"u2").selection(&["url"]));
    assert_eq!(a, b);
    assert_ne!(a, c);
    let canonical = cache.namespace("User.avatar");
    assert_ne!(
        canonical.key(&KeyParts::new().parent(&"u1").selection(&["url"])),
        canonical.key(&KeyParts::new().parent(&"u1").selection(&["url", "size"]))
    );
}

#[test]
fn keys_print_and_parse_as_hex() {
    let key = CacheKey::builder("Query.user").args("u1").finish();
    let text = key.to_string();
    assert_eq!(text.len(), 32);
    assert_eq!(CacheKey::from_hex(&text), Some(key));
    assert_eq!(CacheKey::from_hex("not hex"), None);
    assert_eq!(CacheKey::from_hex(&"g".repeat(32)), None);
}

#[test]
fn keys_maps_of_other_types_are_canonical_too() {
    let mut a: HashMap<String, i64> = HashMap::new();
    let mut b: HashMap<String, i64> = HashMap::new();
    for i in 0..30 {
        a.insert(format!("k{i}"), i);
    }
    for i in (0..30).rev() {
        b.insert(format!("k{i}"), i);
    }
    let ka = CacheKey::builder("Q.m").args(&a).finish();
    let kb = CacheKey::builder("Q.m").args(&b).finish();
    assert_eq!(ka, kb);
    let as_json: Value = serde_json::to_value(&a).expect("json");
    assert_eq!(ka, CacheKey::builder("Q.m").args(&as_json).finish());
}
