//! An answer parsed for checking, borrowing from its body.
//!
//! A workload checks every answer, so the parse is on loadgen's hot path. Parsed into
//! a `serde_json::Value`, a seed answer costs a `String` per key and string and a
//! B-tree per object; this tree borrows every string without escapes from the body
//! and keeps an object as a short list of fields, looked up in order (answers have a
//! handful of fields). That halves the check's cost per request (see `loadgen/README.md`).

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A JSON value whose strings borrow from the text they were parsed from.
#[derive(Debug, PartialEq)]
pub enum Node<'a> {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    Str(Cow<'a, str>),
    Array(Vec<Node<'a>>),
    Object(Vec<(Cow<'a, str>, Node<'a>)>),
}

impl<'a> Node<'a> {
    /// Parse `body`.
    pub fn parse(body: &'a [u8]) -> serde_json::Result<Node<'a>> {
        serde_json::from_slice(body)
    }

    /// The field `name` of an object (the first, if repeated).
    pub fn get(&self, name: &str) -> Option<&Node<'a>> {
        match self {
            Node::Object(fields) => fields.iter().find(|(k, _)| k == name).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_object(&self) -> bool {
        matches!(self, Node::Object(_))
    }
}

/// Compact JSON, for messages.
impl fmt::Display for Node<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quoted = |f: &mut fmt::Formatter<'_>, s: &str| {
            f.write_str(&serde_json::to_string(s).map_err(|_| fmt::Error)?)
        };
        match self {
            Node::Null => f.write_str("null"),
            Node::Bool(b) => write!(f, "{b}"),
            Node::Number(n) => write!(f, "{n}"),
            Node::Str(s) => quoted(f, s),
            Node::Array(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            Node::Object(fields) => {
                f.write_str("{")?;
                for (i, (key, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    quoted(f, key)?;
                    write!(f, ":{value}")?;
                }
                f.write_str("}")
            }
        }
    }
}

/// A string borrowed from the text when it has no escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for Node<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Node<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("JSON")
            }
            fn visit_unit<E>(self) -> Result<Node<'de>, E> {
                Ok(Node::Null)
            }
            fn visit_bool<E>(self, b: bool) -> Result<Node<'de>, E> {
                Ok(Node::Bool(b))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Node<'de>, E> {
                Ok(Node::Number(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Node<'de>, E> {
                Ok(Node::Number(n.into()))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Node<'de>, E> {
                Ok(serde_json::Number::from_f64(n).map_or(Node::Null, Node::Number))
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Node<'de>, E> {
                Ok(Node::Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Node<'de>, E> {
                Ok(Node::Str(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Node<'de>, E> {
                Ok(Node::Str(Cow::Owned(s)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node<'de>, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Node::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node<'de>, A::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some((Text(key), value)) = map.next_entry::<Text<'de>, Node<'de>>()? {
                    fields.push((key, value));
                }
                Ok(Node::Object(fields))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_borrow_unless_escaped_and_print_back_as_json() {
        let text = br#"{"a":"plain","b":"esc\"aped","c":[1,-2,2.5,true,null],"d":{}}"#;
        let node = Node::parse(text).unwrap();
        assert!(matches!(
            node.get("a"),
            Some(Node::Str(Cow::Borrowed("plain")))
        ));
        assert!(matches!(node.get("b"), Some(Node::Str(Cow::Owned(_)))));
        assert_eq!(node.get("b").and_then(Node::as_str), Some("esc\"aped"));
        assert_eq!(node.get("zzz"), None);
        assert_eq!(node.to_string(), std::str::from_utf8(text).unwrap());
    }
}
