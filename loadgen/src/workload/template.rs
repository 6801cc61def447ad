//! Text with placeholders, cut once and joined per request.
//!
//! `{name}` stands for the key drawn from key set `name` for this operation (the same
//! value everywhere in one operation; a listed key's text), `{version}` for the version
//! a write carries (`v<n>`, unique in the run). `{#name}` and `{#version}` are the
//! same as bare numbers: `{#name}` the key, `{#version}` the number `100·n` (`n`
//! followed by `00`), for a write whose value is a number, a price in cents say: a
//! number read back is version `n` when it is a whole multiple of 100, and the data as
//! loaded otherwise ([`version_of_number`]; the commerce graph's prices all end in
//! 99). Written as a whole JSON string (`"first": "{#count}"`) they also drop its
//! quotes, so the variable is sent as a number. A template is parsed once into
//! pieces and slots, so rendering one costs appending bytes and formatting integers:
//! no search per request.

use std::sync::Arc;

use super::keys::KeySet;

/// The placeholder of a write's version.
pub const VERSION: &str = "version";
/// How a version is written: `v` and a number.
pub const VERSION_PREFIX: &str = "v";
/// After `{`: the placeholder is rendered bare (a number, its JSON quotes dropped).
const BARE: char = '#';
/// After a version written as a number: `n` becomes `100·n`.
const NUMBER_SUFFIX: &str = "00";

/// What fills a gap between two pieces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// The key drawn from this key set (index into the workload's key sets).
    Key(usize),
    /// The key drawn from a list: the draw is an index into these texts.
    Listed(usize, Arc<[Box<str>]>),
    /// The write's version, `v<n>`.
    Version,
    /// The write's version as a bare number, `100·n`.
    VersionNumber,
}

/// Text cut at its placeholders: `pieces.len() == slots.len() + 1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pieces: Vec<String>,
    slots: Vec<Slot>,
}

impl Template {
    /// Cut `text` at every `{name}` or `{#name}` (letters, digits, `_`); the name must
    /// be a key set or `version`. Braces around anything else (JSON's own) are kept as
    /// they are.
    pub fn parse(text: &str, keys: &[KeySet], at: &str) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut slots = Vec::new();
        let mut piece = String::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            let after = &rest[open + 1..];
            let (bare, name_at) = match after.strip_prefix(BARE) {
                Some(tail) => (true, tail),
                None => (false, after),
            };
            let name_len = name_at
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(name_at.len());
            if name_len > 0 && name_at[name_len..].starts_with('}') {
                let name = &name_at[..name_len];
                let slot = if name == VERSION {
                    if bare {
                        Slot::VersionNumber
                    } else {
                        Slot::Version
                    }
                } else {
                    let index = keys.iter().position(|k| k.name == name).ok_or_else(|| {
                        let known: Vec<String> =
                            keys.iter().map(|k| format!("{{{}}}", k.name)).collect();
                        format!(
                            "{at}: {{{name}}} is not a key set (known: {}, and {{{VERSION}}} in writes)",
                            if known.is_empty() { "none".to_string() } else { known.join(", ") }
                        )
                    })?;
                    match &keys[index].values {
                        Some(list) => Slot::Listed(index, Arc::clone(list)),
                        None => Slot::Key(index),
                    }
                };
                piece.push_str(&rest[..open]);
                let mut tail = &name_at[name_len + 1..];
                // `"{#name}"`, a whole JSON string: the value goes without its quotes.
                if bare && piece.ends_with('"') && tail.starts_with('"') {
                    piece.pop();
                    tail = &tail[1..];
                }
                pieces.push(std::mem::take(&mut piece));
                slots.push(slot);
                rest = tail;
            } else {
                piece.push_str(&rest[..=open]);
                rest = after;
            }
        }
        piece.push_str(rest);
        pieces.push(piece);
        Ok(Template { pieces, slots })
    }

    /// A template without placeholders.
    pub fn literal(text: &str) -> Template {
        Template {
            pieces: vec![text.to_string()],
            slots: Vec::new(),
        }
    }

    /// Put `prefix` before the text and `suffix` after it.
    pub fn wrap(&mut self, prefix: &str, suffix: &str) {
        self.pieces[0].insert_str(0, prefix);
        if let Some(last) = self.pieces.last_mut() {
            last.push_str(suffix);
        }
    }

    /// The same template for a URL's query string: every piece percent-encoded. Slots
    /// render digits and `v<n>`, which need no encoding; a listed key set's texts must
    /// be letters, digits and `-_.~` alone (the refusal names the first that is not).
    pub fn percent_encoded(&self) -> Result<Template, String> {
        let plain = |t: &str| {
            t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~'))
        };
        for slot in &self.slots {
            if let Slot::Listed(_, list) = slot {
                if let Some(bad) = list.iter().find(|t| !plain(t)) {
                    return Err(format!(
                        "the listed key {bad:?} would need encoding in a URL; a read by GET takes keys of letters, digits and -_.~"
                    ));
                }
            }
        }
        Ok(Template {
            pieces: self
                .pieces
                .iter()
                .map(|p| crate::bench::request_template::percent_encoded(p))
                .collect(),
            slots: self.slots.clone(),
        })
    }

    /// The key sets this template draws from.
    pub fn key_sets(&self) -> impl Iterator<Item = usize> + '_ {
        self.slots.iter().filter_map(|s| match s {
            Slot::Key(k) | Slot::Listed(k, _) => Some(*k),
            Slot::Version | Slot::VersionNumber => None,
        })
    }

    pub fn has_version(&self) -> bool {
        self.slots
            .iter()
            .any(|s| matches!(s, Slot::Version | Slot::VersionNumber))
    }

    pub fn is_literal(&self) -> bool {
        self.slots.is_empty()
    }

    /// Append the text with `keys[k]` for `{name of k}` and `v<version>` for `{version}`.
    pub fn render_into(&self, keys: &[u64], version: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(self.pieces[0].as_bytes());
        for (slot, piece) in self.slots.iter().zip(&self.pieces[1..]) {
            match slot {
                Slot::Key(k) => push_decimal(out, keys[*k]),
                Slot::Listed(k, list) => out.extend_from_slice(listed(list, keys[*k]).as_bytes()),
                Slot::Version => {
                    out.extend_from_slice(VERSION_PREFIX.as_bytes());
                    push_decimal(out, version);
                }
                Slot::VersionNumber => {
                    push_decimal(out, version);
                    out.extend_from_slice(NUMBER_SUFFIX.as_bytes());
                }
            }
            out.extend_from_slice(piece.as_bytes());
        }
    }

    /// The text as a string (see [`Template::render_into`]).
    pub fn render(&self, keys: &[u64], version: u64) -> String {
        let mut out = Vec::with_capacity(self.pieces.iter().map(String::len).sum::<usize>() + 8);
        self.render_into(keys, version, &mut out);
        // Pieces are UTF-8 and numbers are ASCII.
        String::from_utf8(out).unwrap_or_default()
    }

    /// Whether `text` is what this template renders with `keys` (no version slot):
    /// compares piece by piece without building the string.
    pub fn matches(&self, text: &str, keys: &[u64]) -> bool {
        let mut rest = text.as_bytes();
        let mut digits = [0u8; 20];
        for (i, piece) in self.pieces.iter().enumerate() {
            if i > 0 {
                let d: &[u8] = match &self.slots[i - 1] {
                    Slot::Key(k) => decimal(keys[*k], &mut digits),
                    Slot::Listed(k, list) => listed(list, keys[*k]).as_bytes(),
                    Slot::Version | Slot::VersionNumber => return false,
                };
                if !rest.starts_with(d) {
                    return false;
                }
                rest = &rest[d.len()..];
            }
            if !rest.starts_with(piece.as_bytes()) {
                return false;
            }
            rest = &rest[piece.len()..];
        }
        rest.is_empty()
    }
}

/// The listed text of draw `index` (an index out of range, which the draws never give,
/// renders empty).
fn listed(list: &[Box<str>], index: u64) -> &str {
    list.get(index as usize).map_or("", |v| v)
}

fn decimal(mut n: u64, buffer: &mut [u8; 20]) -> &[u8] {
    let mut at = buffer.len();
    loop {
        at -= 1;
        buffer[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buffer[at..]
}

fn push_decimal(out: &mut Vec<u8>, n: u64) {
    let mut buffer = [0u8; 20];
    out.extend_from_slice(decimal(n, &mut buffer));
}

/// The version a value carries: the number after a final `v` (`"v12"`, `"title v12"`),
/// or 0 for a value no write of the run produced (the data as the service loaded it).
pub fn version_of(value: &str) -> u64 {
    let digits = value.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 19 {
        return 0;
    }
    let (head, number) = value.split_at(value.len() - digits);
    if !head.ends_with(VERSION_PREFIX) {
        return 0;
    }
    number.parse().unwrap_or(0)
}

/// The version a number carries (a write's `{#version}`, `100·n`): `n` for a whole
/// multiple of 100 from 100 up; any other value (a price of 1299 cents, as the data
/// was loaded) is version 0.
pub fn version_of_number(value: f64) -> u64 {
    if value >= 100.0
        && value.fract() == 0.0
        && value < 9.0e15
        && (value as u64).is_multiple_of(100)
    {
        value as u64 / 100
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::keys::KeyFile;

    fn keys() -> Vec<KeySet> {
        let file = |d: &str| KeyFile {
            distribution: d.into(),
            count: Some(10),
            first: None,
            values: None,
            values_file: None,
            exponent: None,
            hot_fraction: None,
            hot_share: None,
        };
        let listed = KeyFile {
            count: None,
            values: Some(vec!["000000000017".into(), "000000000024".into()]),
            ..file("uniform")
        };
        vec![
            KeySet::new("post", &file("uniform")).unwrap(),
            KeySet::new("user", &file("uniform")).unwrap(),
            KeySet::new("upc", &listed).unwrap(),
        ]
    }

    #[test]
    fn placeholders_are_cut_and_joined() {
        let keys = keys();
        let t = Template::parse(
            r#"{"pid":"p{post}","title":"{version}","u":"u{user}","again":"{post}"}"#,
            &keys,
            "x",
        )
        .unwrap();
        assert_eq!(t.key_sets().collect::<Vec<_>>(), [0, 1, 0]);
        assert!(t.has_version());
        assert!(!t.render(&[7, 3, 0], 42).contains('#'));
        assert_eq!(
            t.render(&[7, 3], 42),
            r#"{"pid":"p7","title":"v42","u":"u3","again":"7"}"#
        );
        let plain = Template::parse("{ me { id } }", &keys, "x").unwrap();
        assert!(plain.is_literal());
        assert_eq!(plain.render(&[], 0), "{ me { id } }");
        let e = Template::parse("u{nope}", &keys, "operation \"me\".headers").unwrap_err();
        assert!(
            e.contains("operation \"me\".headers: {nope} is not a key set (known: {post}, {user}"),
            "{e}"
        );
    }

    #[test]
    fn listed_keys_render_their_text_and_bare_placeholders_drop_their_quotes() {
        let keys = keys();
        let t = Template::parse(
            r#"{"upc":"{upc}","price":"{#version}","first":"{#post}","in":"n{#post}"}"#,
            &keys,
            "x",
        )
        .unwrap();
        assert!(t.has_version());
        assert_eq!(t.key_sets().collect::<Vec<_>>(), [2, 0, 0]);
        assert_eq!(
            t.render(&[7, 0, 1], 42),
            r#"{"upc":"000000000024","price":4200,"first":7,"in":"n7"}"#
        );
        let id = Template::parse("{upc}", &keys, "x").unwrap();
        assert!(id.matches("000000000017", &[0, 0, 0]));
        assert!(!id.matches("000000000024", &[0, 0, 0]));
    }

    #[test]
    fn matching_needs_no_string() {
        let keys = keys();
        let t = Template::parse("u{user}", &keys, "x").unwrap();
        assert!(t.matches("u3", &[0, 3]));
        assert!(!t.matches("u31", &[0, 3]));
        assert!(!t.matches("u", &[0, 3]));
        assert!(!t.matches("x3", &[0, 3]));
        assert!(Template::literal("u1").matches("u1", &[]));
    }

    #[test]
    fn versions_are_read_from_the_end() {
        assert_eq!(version_of("v12"), 12);
        assert_eq!(version_of("Post 1 v7"), 7);
        assert_eq!(version_of("Post 1"), 0);
        assert_eq!(version_of("John"), 0);
        assert_eq!(version_of("v"), 0);
        assert_eq!(version_of("v99999999999999999999999"), 0);
        assert_eq!(version_of_number(1200.0), 12);
        assert_eq!(version_of_number(1299.0), 0);
        assert_eq!(version_of_number(12.5), 0);
        assert_eq!(version_of_number(0.0), 0);
        assert_eq!(version_of_number(-300.0), 0);
    }
}
