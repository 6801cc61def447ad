//! The tape's tests: reads by position and by key, copies, and the parser checked
//! against serde_json and the standard library on generated documents.

use super::parser::{ascii_prefix, MAX_DEPTH};
use super::*;
use proptest::prelude::*;

fn tape(text: &str) -> Tape {
    Tape::parse(Bytes::copy_from_slice(text.as_bytes())).unwrap()
}

/// Rebuild a serde_json value from the tape, decoding as serde_json would.
fn to_json(v: Value<'_>) -> serde_json::Value {
    match v.kind() {
        Kind::Object => serde_json::Value::Object(
            v.members()
                .map(|m| (m.key().into_owned(), to_json(m)))
                .collect(),
        ),
        Kind::Array => serde_json::Value::Array(v.items().map(to_json).collect()),
        _ => serde_json::from_slice(v.raw()).unwrap(),
    }
}

proptest! {
    /// Short-key comparison agrees with `==` at every length up to past 16, for
    /// equal strings and for strings that differ in any one byte.
    #[test]
    fn same_bytes_is_equality(a in proptest::collection::vec(any::<u8>(), 0..24), at in any::<usize>(), flip in 1u8..) {
        let mut b = a.clone();
        prop_assert!(same_bytes(&a, &b));
        if !b.is_empty() {
            let i = at % b.len();
            b[i] ^= flip;
            prop_assert!(!same_bytes(&a, &b));
        }
        b.push(0);
        prop_assert_eq!(same_bytes(&a, &b), false);
    }
}

#[test]
fn reads_members_items_and_raw_leaves() {
    let t = tape(r#" {"data":{"me":{"id":"u1","n":-1.5e3,"s":"a\"b","l":[1,[],{}],"z":null}}} "#);
    let me = t.root().get("data").unwrap().get("me").unwrap();
    assert_eq!(me.get("id").unwrap().as_str().unwrap(), "u1");
    assert_eq!(me.get("n").unwrap().raw(), b"-1.5e3");
    assert_eq!(me.get("s").unwrap().raw(), br#""a\"b""#);
    assert_eq!(me.get("s").unwrap().as_str().unwrap(), "a\"b");
    assert_eq!(me.get("l").unwrap().items().count(), 3);
    assert!(me.get("z").unwrap().is_null());
    assert!(me.get("missing").is_none());
    let (ordinal, l) = me.find("l").unwrap();
    assert_eq!((ordinal, l.raw()), (3, &b"[1,[],{}]"[..]));
    assert!(me.find("missing").is_none());
}

#[test]
fn members_are_found_by_position_from_the_start_or_from_one_known() {
    let t = tape(r#"{"a":{"x":1,"y":[2,3]},"b":[{"x":4}],"c":5}"#);
    let root = t.root();
    let keys = |v: Option<Value<'_>>| v.map(|v| v.key().into_owned());
    assert_eq!(keys(root.member_at(0, None)).as_deref(), Some("a"));
    assert_eq!(keys(root.member_at(2, None)).as_deref(), Some("c"));
    assert_eq!(keys(root.member_at(3, None)), None);
    let (at, b) = root.find("b").unwrap();
    let from = Some((at, b.index()));
    assert_eq!(keys(root.member_at(2, from)).as_deref(), Some("c"));
    assert_eq!(keys(root.member_at(1, from)).as_deref(), Some("b"));
    // A member known to come after the one asked for: counted from the start.
    assert_eq!(keys(root.member_at(0, from)).as_deref(), Some("a"));
    // An index outside the object: counted from the start.
    assert_eq!(keys(root.member_at(2, Some((1, 0)))).as_deref(), Some("c"));
    let inner = root.get("a").unwrap();
    assert_eq!(keys(inner.member_at(1, None)).as_deref(), Some("y"));
    assert!(b.member_at(0, None).is_none(), "a list has no members");
}

#[test]
fn escaped_keys_compare_by_their_value() {
    let t = tape(r#"{"\u0069d":"u1"}"#);
    assert!(t.root().get("id").is_some());
    assert_eq!(t.root().members().next().unwrap().key(), "id");
}

#[test]
fn a_copied_subtree_stands_alone() {
    let t = tape(r#"{"e0":[{"id":"u1","p":[{"x":1}]},{"id":"u2"}]}"#);
    let second = t.root().get("e0").unwrap().items().next().unwrap();
    let copy = second.to_tape();
    assert_eq!(copy.text().as_ref(), br#"{"id":"u1","p":[{"x":1}]}"#);
    assert_eq!(copy.root().get("id").unwrap().raw(), b"\"u1\"");
    let x = copy.root().get("p").unwrap().items().next().unwrap();
    assert_eq!(x.get("x").unwrap().raw(), b"1");
    assert_eq!(to_json(copy.root()), to_json(second));
}

#[test]
fn malformed_text_is_an_error() {
    for bad in [
        "",
        "{",
        "[1,]",
        "{\"a\"}",
        "{\"a\":}",
        "01",
        "1.",
        "-",
        "1e",
        "\"a\nb\"",
        "\"\\x\"",
        "\"\\u12g4\"",
        "nul",
        "[1] 2",
        "{\"a\":1,}",
        "\"abc",
    ] {
        assert!(Tape::parse(Bytes::from(bad)).is_err(), "{bad:?}");
    }
    let deep = "[".repeat(MAX_DEPTH + 2) + &"]".repeat(MAX_DEPTH + 2);
    assert!(Tape::parse(Bytes::from(deep)).is_err());
    assert!(Tape::parse(Bytes::from_static(b"\"\xff\"")).is_err());
}

/// Past a good character of more than one byte, a bad byte is still found, where the
/// standard library finds it: in a later string, in a character cut short, and
/// outside any string (where the grammar fails too, and UTF-8 is reported first).
#[test]
fn a_bad_byte_after_a_good_character_is_found_where_the_standard_library_finds_it() {
    let texts: [&[u8]; 4] = [
        b"[\"\xc3\xa9 then plain text past sixteen bytes\",\"plain text again, then \xff\"]",
        b"{\"\xc3\xa9\":\"\xe2\x82\xac then a euro sign cut short: \xe2\x82\"}",
        b"{\"a\":\"\xc3\xa9\"} \xff",
        b"[\xff]",
    ];
    for text in texts {
        let expected = std::str::from_utf8(text).unwrap_err().valid_up_to();
        let error = Tape::parse(Bytes::copy_from_slice(text)).unwrap_err();
        assert_eq!(
            (error.message, error.at),
            ("invalid UTF-8", expected),
            "{text:?}"
        );
    }
}

/// `text` (valid JSON) parses to what serde_json reads from it, and the root's raw
/// text is the value without the whitespace around it. The comparison is with serde_json's
/// reading of the text, not with the value it was written from: its float parsing is not
/// exact.
fn reads_as_serde_json(text: &str) -> Result<(), TestCaseError> {
    let t = Tape::parse(Bytes::from(text.to_string())).unwrap();
    let expected: serde_json::Value = serde_json::from_str(text).unwrap();
    prop_assert_eq!(to_json(t.root()), expected);
    prop_assert_eq!(t.root().raw(), text.trim().as_bytes());
    Ok(())
}

/// `value` as JSON with `gap()` written before and after every token.
fn spaced(value: &serde_json::Value, gap: &mut impl FnMut() -> &'static str, out: &mut String) {
    out.push_str(gap());
    match value {
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                spaced(item, gap, out);
            }
            out.push_str(gap());
            out.push(']');
        }
        serde_json::Value::Object(members) => {
            out.push('{');
            for (i, (key, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(gap());
                out.push_str(&serde_json::to_string(key).unwrap());
                out.push_str(gap());
                out.push(':');
                spaced(item, gap, out);
            }
            out.push_str(gap());
            out.push('}');
        }
        leaf => out.push_str(&leaf.to_string()),
    }
    out.push_str(gap());
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(|n| serde_json::json!(n)),
        (-1e12f64..1e12).prop_map(|n| serde_json::json!(n)),
        ".*".prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(".*", inner, 0..8)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// The text between a string's quotes: plain runs, escapes good and bad, raw
/// quotes, control characters (0x1f is one, 0x7f is not) and characters of two to
/// four bytes, at lengths that cross the parser's sixteen- and eight-byte steps
/// anywhere.
fn string_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        8 => "[a-z0-9 ]{1,11}",
        1 => Just("\\\"".to_string()),
        1 => Just("\\\\".to_string()),
        1 => Just("\\n".to_string()),
        1 => Just("\\u00e9".to_string()),
        1 => Just("\\x".to_string()),
        1 => Just("\\u12g4".to_string()),
        1 => Just("\"".to_string()),
        1 => Just("\u{1f}".to_string()),
        1 => Just("\n".to_string()),
        1 => Just("\u{7f}".to_string()),
        1 => Just("é€😀".to_string()),
    ];
    prop::collection::vec(piece, 0..10).prop_map(|pieces| pieces.concat())
}

proptest! {
    #[test]
    fn strings_are_read_as_serde_json_reads_them(pad in 0usize..16, body in string_text(), key in any::<bool>()) {
        // `pad` shifts where the string starts against the parser's steps.
        let text = if key {
            format!("{{{}\"{}\":1}}", " ".repeat(pad), body)
        } else {
            format!("[{}\"{}\"]", " ".repeat(pad), body)
        };
        let parsed = Tape::parse(Bytes::from(text.clone()));
        let expected = serde_json::from_str::<serde_json::Value>(&text);
        prop_assert_eq!(parsed.is_ok(), expected.is_ok(), "{:?}", text);
        if let (Ok(t), Ok(v)) = (parsed, expected) {
            prop_assert_eq!(to_json(t.root()), v);
        }
    }

    #[test]
    fn every_key_an_object_holds_is_found_at_its_position(value in json_value(), probe in "[a-z_]{0,6}") {
        let text = serde_json::to_string(&value).unwrap();
        let t = Tape::parse(Bytes::from(text)).unwrap();
        let mut objects = vec![t.root()];
        while let Some(v) = objects.pop() {
            objects.extend(v.members().chain(v.items()));
            if v.kind() != Kind::Object {
                continue;
            }
            for (ordinal, m) in v.members().enumerate() {
                let key = m.key();
                let (at, found) = v.find(&key).unwrap();
                prop_assert_eq!((at as usize, found.index()), (ordinal, m.index()));
            }
            let held = v.members().any(|m| m.key() == probe);
            prop_assert_eq!(v.get(&probe).is_some(), held);
        }
    }

    #[test]
    fn agrees_with_serde_json(value in json_value(), pretty in any::<bool>()) {
        let text = if pretty {
            serde_json::to_string_pretty(&value).unwrap()
        } else {
            serde_json::to_string(&value).unwrap()
        };
        reads_as_serde_json(&text)?;
    }

    /// Whitespace of every kind between any two tokens (where the parser looks for it
    /// only when the byte it expects is not there): read as serde_json reads it, and
    /// the root's raw text is the value without what surrounds it.
    #[test]
    fn whitespace_between_any_tokens_is_read_as_serde_json_reads_it(
        value in json_value(),
        gaps in prop::collection::vec(prop_oneof![Just(""), Just(" "), Just("\t"), Just("\r\n"), Just("  \n\t")], 1..9),
    ) {
        let mut text = String::new();
        let mut gap = gaps.iter().cycle();
        spaced(&value, &mut || gap.next().copied().unwrap_or(""), &mut text);
        reads_as_serde_json(&text)?;
    }

    /// A string of ASCII with one byte of any value at any place: the text is
    /// refused as UTF-8 exactly when the standard library refuses it, at the byte
    /// it names, wherever the byte falls against the sixty-four- and sixteen-byte
    /// steps of the ASCII check. `tail` then checks that every byte before the ASCII
    /// prefix's end is ASCII, and the sixteen after it hold one that is not.
    #[test]
    fn utf8_is_checked_as_the_standard_library_checks_it(
        len in 0usize..200,
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        tail in prop::collection::vec(any::<u8>(), 0..4),
    ) {
        let mut body = vec![b'a'; len];
        if len > 0 {
            body[at.index(len)] = byte;
        }
        body.extend_from_slice(&tail);
        let mut text = b"\"".to_vec();
        text.extend_from_slice(&body);
        text.push(b'"');
        let ascii = ascii_prefix(&text);
        prop_assert!(text[..ascii].is_ascii());
        if ascii + 16 <= text.len() {
            prop_assert!(!text[ascii..ascii + 16].is_ascii());
        }
        let parsed = Tape::parse(Bytes::from(text.clone()));
        match std::str::from_utf8(&text) {
            Err(e) => {
                let err = parsed.unwrap_err();
                prop_assert_eq!(err.message, "invalid UTF-8");
                prop_assert_eq!(err.at, e.valid_up_to());
            }
            Ok(_) => prop_assert_eq!(
                parsed.is_ok(),
                serde_json::from_slice::<serde_json::Value>(&text).is_ok()
            ),
        }
    }

    #[test]
    fn never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let parsed = Tape::parse(Bytes::from(bytes.clone()));
        let expected = serde_json::from_slice::<serde_json::Value>(&bytes).is_ok();
        prop_assert_eq!(parsed.is_ok(), expected);
    }
}
