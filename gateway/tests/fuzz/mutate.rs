//! Mutations of valid input: of a document's text at the level of its tokens, and of
//! a request body's bytes.

use rand::rngs::ChaCha8Rng;
use rand::seq::IndexedRandom;
use rand::RngExt;

/// Pieces that break or stretch a document when spliced in.
const SPLICES: &[&str] = &[
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    "...",
    "$",
    "@",
    ":",
    "!",
    "=",
    "|",
    "&",
    "\"",
    "\"\"\"",
    "#",
    "\\u{0}",
    "on",
    "fragment",
    "query",
    "mutation",
    "subscription",
    "__typename",
    "__schema",
    "__type(name: \"User\") { name }",
    "$v0",
    "$undefined",
    "@skip",
    "@include(if: $nope)",
    "@deprecated",
    "...F9",
    "...on Nope { a }",
    "-1",
    "1e999",
    "99999999999999999999",
    "0x10",
    "null",
    "true",
    "[1, [2, [3]]]",
    "{a: {b: {c: 1}}}",
    "\"\\uD800\"",
    "\"\\x\"",
    "é",
    "\u{1F600}",
    "\u{0}",
    "\u{FEFF}",
    "\r\n",
    "\t",
    "me",
    "topPosts",
    "getPost",
    "author",
    "pid",
    "id",
    "name",
    "count",
    "User",
    "Post",
];

/// Split `text` into tokens: names, punctuation, strings, whitespace runs.
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let mut token = c.to_string();
        if c.is_alphanumeric() || c == '_' {
            while let Some(&n) = chars.peek() {
                if n.is_alphanumeric() || n == '_' {
                    token.push(n);
                    chars.next();
                } else {
                    break;
                }
            }
        } else if c == '"' {
            for n in chars.by_ref() {
                token.push(n);
                if n == '"' {
                    break;
                }
            }
        } else if c.is_whitespace() {
            while let Some(&n) = chars.peek() {
                if n.is_whitespace() {
                    token.push(n);
                    chars.next();
                } else {
                    break;
                }
            }
        }
        out.push(token);
    }
    out
}

/// One to four token-level edits of a valid document.
pub fn document(rng: &mut ChaCha8Rng, valid: &str) -> String {
    let mut t = tokens(valid);
    for _ in 0..rng.random_range(1..=4) {
        if t.is_empty() {
            t.push("{".into());
        }
        let i = rng.random_range(0..t.len());
        match rng.random_range(0..8) {
            0 => {
                t.remove(i);
            }
            1 => {
                let copy = t[i].clone();
                t.insert(i, copy);
            }
            2 => {
                let j = rng.random_range(0..t.len());
                t.swap(i, j);
            }
            3 => t[i] = SPLICES.choose(rng).copied().unwrap_or("{").to_string(),
            4 => t.insert(i, SPLICES.choose(rng).copied().unwrap_or("}").to_string()),
            5 => {
                // A run of a slice of the document: repetition and depth.
                let j = (i + rng.random_range(1..8)).min(t.len());
                let slice: Vec<String> = t[i..j].to_vec();
                for _ in 0..rng.random_range(2..50) {
                    t.splice(j..j, slice.iter().cloned());
                }
            }
            6 => {
                // Deep nesting.
                let n = rng.random_range(10..400);
                t.insert(i, format!("{}{}", "{ me ".repeat(n), "}".repeat(n)));
            }
            _ => t.truncate(i),
        }
    }
    t.concat()
}

/// One to eight byte-level edits of a request body.
pub fn bytes(rng: &mut ChaCha8Rng, body: &[u8]) -> Vec<u8> {
    let mut b = body.to_vec();
    for _ in 0..rng.random_range(1..=8) {
        if b.is_empty() {
            b.push(b'{');
        }
        let i = rng.random_range(0..b.len());
        match rng.random_range(0..6) {
            0 => b[i] ^= 1 << rng.random_range(0..8),
            1 => b[i] = rng.random(),
            2 => {
                b.remove(i);
            }
            3 => b.insert(i, *b"{}[]\",:\\0\x00\xff".choose(rng).unwrap_or(&b'"')),
            4 => {
                let j = (i + rng.random_range(1..16)).min(b.len());
                let slice = b[i..j].to_vec();
                b.splice(i..i, slice);
            }
            _ => b.truncate(i),
        }
    }
    b
}

/// Bytes with no structure at all.
pub fn random_bytes(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let len = match rng.random_range(0..4) {
        0 => rng.random_range(0..8),
        1 => rng.random_range(0..256),
        2 => rng.random_range(0..4096),
        _ => rng.random_range(0..70_000),
    };
    (0..len).map(|_| rng.random()).collect()
}
