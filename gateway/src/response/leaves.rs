//! Whether a subgraph's value for a scalar field is a value of the field's type, as
//! its JSON kind tells: a built-in scalar takes its own kind only (an `Int` within 32
//! bits), an integer `ID` is written as the string it stands for, and a custom scalar
//! takes anything. The writer copies a value that passes as the subgraph wrote it.

use crate::answer::tape::{Kind, Value};
use crate::plan::Scalar;

/// What a subgraph's value for a scalar becomes.
pub(super) enum Leaf {
    AsIs,
    /// An integer `ID`, written as the string it stands for.
    Quoted,
    /// Not a value of the scalar: what one would be.
    Wrong(&'static str),
}

/// Whether `value` is a value of `scalar` (a custom scalar takes any).
pub(super) fn leaf(scalar: Scalar, value: &Value<'_>) -> Leaf {
    // A JSON number without fraction or exponent, within 32 bits: at most nine
    // digits always are (the usual case, told without parsing); more are parsed.
    let integer = |raw: &[u8]| {
        let digits = raw.strip_prefix(b"-").unwrap_or(raw);
        if (1..=9).contains(&digits.len()) && digits.iter().all(u8::is_ascii_digit) {
            return true;
        }
        std::str::from_utf8(raw)
            .ok()
            .and_then(|t| t.parse::<i32>().ok())
            .is_some()
    };
    // Any JSON integer (an `ID` may be a large one).
    let whole = |raw: &[u8]| {
        let digits = raw.strip_prefix(b"-").unwrap_or(raw);
        !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
    };
    let kind = value.kind();
    let string = matches!(kind, Kind::PlainString | Kind::EscapedString);
    match scalar {
        Scalar::Custom => Leaf::AsIs,
        Scalar::String if string => Leaf::AsIs,
        Scalar::String => Leaf::Wrong("a String"),
        Scalar::Boolean if kind == Kind::Bool => Leaf::AsIs,
        Scalar::Boolean => Leaf::Wrong("a Boolean"),
        Scalar::Float if kind == Kind::Number => Leaf::AsIs,
        Scalar::Float => Leaf::Wrong("a Float"),
        Scalar::Int if kind == Kind::Number && integer(value.raw()) => Leaf::AsIs,
        Scalar::Int => Leaf::Wrong("an Int (a 32-bit integer)"),
        Scalar::Id if string => Leaf::AsIs,
        Scalar::Id if kind == Kind::Number && whole(value.raw()) => Leaf::Quoted,
        Scalar::Id => Leaf::Wrong("an ID"),
    }
}

#[cfg(test)]
mod tests {
    use super::{leaf, Leaf, Scalar};
    use crate::answer::tape::Tape;

    /// What the writer does with the JSON `text` as a value of `scalar`.
    fn of(scalar: Scalar, text: &'static str) -> &'static str {
        let tape = Tape::parse(bytes::Bytes::from_static(text.as_bytes())).unwrap();
        match leaf(scalar, &tape.root()) {
            Leaf::AsIs => "as is",
            Leaf::Quoted => "quoted",
            Leaf::Wrong(_) => "wrong",
        }
    }

    #[test]
    fn built_in_scalars_take_their_json_kind_only() {
        let cases = [
            (Scalar::Int, "7", "as is"),
            (Scalar::Int, "-2147483648", "as is"),
            (Scalar::Int, "2147483647", "as is"),
            (Scalar::Int, "-999999999", "as is"),
            (Scalar::Int, "999999999", "as is"),
            (Scalar::Int, "-0", "as is"),
            (Scalar::Int, "2147483648", "wrong"),
            (Scalar::Int, "-2147483649", "wrong"),
            (Scalar::Int, "9999999999", "wrong"),
            (Scalar::Int, "7.0", "wrong"),
            (Scalar::Int, "1e3", "wrong"),
            (Scalar::Int, "\"7\"", "wrong"),
            (Scalar::Float, "7", "as is"),
            (Scalar::Float, "0.5", "as is"),
            (Scalar::Float, "true", "wrong"),
            (Scalar::String, "\"a\\nb\"", "as is"),
            (Scalar::String, "1", "wrong"),
            (Scalar::Boolean, "false", "as is"),
            (Scalar::Boolean, "0", "wrong"),
            (Scalar::Id, "\"u1\"", "as is"),
            (Scalar::Id, "12345678901234", "quoted"),
            (Scalar::Id, "-3", "quoted"),
            (Scalar::Id, "1.5", "wrong"),
            (Scalar::Id, "[1]", "wrong"),
            (Scalar::Custom, "{\"any\":[1]}", "as is"),
        ];
        for (scalar, text, expected) in cases {
            assert_eq!(of(scalar, text), expected, "{scalar:?} {text}");
        }
    }
}
