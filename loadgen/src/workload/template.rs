//! Text with placeholders, cut once and joined per request.
//!
//! `{name}` stands for the key drawn from key set `name` for this operation (the same
//! value everywhere in one operation), `{version}` for the version a write carries
//! (`v<n>`, unique in the run). A template is parsed once into pieces and slots, so
//! rendering one costs appending bytes and formatting integers: no search per request.

use super::keys::KeySet;

/// The placeholder of a write's version.
pub const VERSION: &str = "version";
/// How a version is written: `v` and a number.
pub const VERSION_PREFIX: &str = "v";

/// What fills a gap between two pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The key drawn from this key set (index into the workload's key sets).
    Key(usize),
    /// The write's version, `v<n>`.
    Version,
}

/// Text cut at its placeholders: `pieces.len() == slots.len() + 1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pieces: Vec<String>,
    slots: Vec<Slot>,
}

impl Template {
    /// Cut `text` at every `{name}` (letters, digits, `_`); the name must be a key set
    /// or `version`. Braces around anything else (JSON's own) are kept as they are.
    pub fn parse(text: &str, keys: &[KeySet], at: &str) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut slots = Vec::new();
        let mut piece = String::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            let after = &rest[open + 1..];
            let name_len = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            if name_len > 0 && after[name_len..].starts_with('}') {
                let name = &after[..name_len];
                let slot = if name == VERSION {
                    Slot::Version
                } else {
                    let index = keys.iter().position(|k| k.name == name).ok_or_else(|| {
                        let known: Vec<String> =
                            keys.iter().map(|k| format!("{{{}}}", k.name)).collect();
                        format!(
                            "{at}: {{{name}}} is not a key set (known: {}, and {{{VERSION}}} in writes)",
                            if known.is_empty() { "none".to_string() } else { known.join(", ") }
                        )
                    })?;
                    Slot::Key(index)
                };
                piece.push_str(&rest[..open]);
                pieces.push(std::mem::take(&mut piece));
                slots.push(slot);
                rest = &after[name_len + 1..];
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

    /// The key sets this template draws from.
    pub fn key_sets(&self) -> impl Iterator<Item = usize> + '_ {
        self.slots.iter().filter_map(|s| match s {
            Slot::Key(k) => Some(*k),
            Slot::Version => None,
        })
    }

    pub fn has_version(&self) -> bool {
        self.slots.contains(&Slot::Version)
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
                Slot::Version => {
                    out.extend_from_slice(VERSION_PREFIX.as_bytes());
                    push_decimal(out, version);
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
                let number = match self.slots[i - 1] {
                    Slot::Key(k) => keys[k],
                    Slot::Version => return false,
                };
                let d = decimal(number, &mut digits);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::keys::KeyFile;

    fn keys() -> Vec<KeySet> {
        let file = |d: &str| KeyFile {
            distribution: d.into(),
            count: 10,
            first: None,
            exponent: None,
            hot_fraction: None,
            hot_share: None,
        };
        vec![
            KeySet::new("post", &file("uniform")).unwrap(),
            KeySet::new("user", &file("uniform")).unwrap(),
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
    }
}
