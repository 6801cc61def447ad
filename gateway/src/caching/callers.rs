//! A caller's headers in a cache or coalescing key, byte for byte.
//!
//! The subgraphs are sent the caller's `authorization` as its raw bytes, so a key that
//! stands for the caller must tell apart every two values a subgraph could: two tokens
//! that differ only in a byte that is not UTF-8 (or not visible ASCII), and an empty
//! header from none at all. A lossy conversion (`from_utf8_lossy`, or `to_str()` with
//! `""` for a value it refuses) merged them, and one caller's answer could reach
//! another.

use std::fmt::Write as _;

use axum::http::HeaderValue;

/// Append `value` to `key` so that no two header values, and no value and its absence,
/// write the same text: `-` for no header; `=` and then the value, each byte outside
/// printable ASCII (and the backslash) written as `\xNN`.
pub(crate) fn push_header(key: &mut String, value: Option<&HeaderValue>) {
    let Some(value) = value else {
        key.push('-');
        return;
    };
    key.push('=');
    for &b in value.as_bytes() {
        if (0x20..0x7f).contains(&b) && b != b'\\' {
            key.push(b as char);
        } else {
            let _ = write!(key, "\\x{b:02x}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(value: Option<&[u8]>) -> String {
        let value = value.map(|v| HeaderValue::from_bytes(v).unwrap());
        let mut key = String::new();
        push_header(&mut key, value.as_ref());
        key
    }

    #[test]
    fn every_value_and_its_absence_write_apart() {
        let values: [Option<&[u8]>; 7] = [
            None,
            Some(b""),
            Some(b"Bearer x\xff"),
            Some(b"Bearer x\xfe"),
            Some(b"Bearer x\\xff"),
            Some(b"Bearer \t x"),
            Some(b"Bearer u1"),
        ];
        let keys: Vec<String> = values.iter().map(|v| written(*v)).collect();
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(written(Some(b"Bearer u1")), "=Bearer u1");
        assert_eq!(written(Some(b"x\xff")), "=x\\xff");
    }
}
