//! What a query text costs before it is parsed: its tokens and how deeply it nests,
//! measured in one linear pass that allocates nothing.
//!
//! The parser builds a syntax tree many times the size of its text (a 1 MiB document
//! of 500,000 tokens took 0.7 s and 180 MB), and async-graphql's own limits run only on
//! that tree. So the two measures that bound the parser's work are taken here, on the
//! bytes, and a text over either limit is refused before the parser sees it: the token
//! count bounds its time and memory (`--max-tokens`), the nesting its recursion (twice
//! `--max-depth`, plus room for arguments and lists).
//!
//! Tokens are counted as GraphQL's lexer would see them: a punctuator (`...` is one), a
//! name, a number, a string (block strings too) each count one; white space, commas
//! and comments count nothing. A byte the lexer would reject counts one, and the parser
//! rejects it if the text gets that far.

/// A text's tokens and its deepest nesting of `{`, `(` and `[`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextShape {
    pub tokens: usize,
    pub nesting: usize,
}

/// Measure `query`, stopping early once it has more than `max_tokens` tokens (the count
/// is then `max_tokens + 1`: the text is refused whatever the rest holds).
pub fn shape(query: &str, max_tokens: usize) -> TextShape {
    let bytes = query.as_bytes();
    let (mut tokens, mut depth, mut nesting, mut i) = (0usize, 0usize, 0usize, 0usize);
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b' ' | b'\t' | b'\n' | b'\r' | b',' => {
                i += 1;
                continue;
            }
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' && bytes[i] != b'\r' {
                    i += 1;
                }
                continue;
            }
            b'"' => i = after_string(bytes, i),
            b'.' if bytes[i..].starts_with(b"...") => i += 3,
            b'{' | b'(' | b'[' => {
                depth += 1;
                nesting = nesting.max(depth);
                i += 1;
            }
            b'}' | b')' | b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            _ if is_word(b) => {
                while i < bytes.len() && is_word(bytes[i]) {
                    i += 1;
                }
            }
            // `! $ & : = @ |`, and any byte the lexer rejects.
            _ => i += 1,
        }
        tokens += 1;
        if tokens > max_tokens {
            break;
        }
    }
    TextShape { tokens, nesting }
}

/// Refuse `query` when it has more than `max_tokens` tokens or nests deeper than
/// `max_nesting`, with a message naming the flag.
pub fn check(query: &str, max_tokens: usize, max_nesting: usize) -> Result<(), String> {
    let shape = shape(query, max_tokens);
    if shape.tokens > max_tokens {
        return Err(format!(
            "the query has more than {max_tokens} tokens (--max-tokens)"
        ));
    }
    if shape.nesting > max_nesting {
        return Err(format!(
            "the query nests {} levels deep; the limit is {max_nesting} (2 × --max-depth + 16)",
            shape.nesting
        ));
    }
    Ok(())
}

/// A byte of a name or a number (`-12.5e+3`): one run of them is one token.
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'+' | b'.')
}

/// The index just past the string that opens at `start` (an unterminated one runs to
/// the end of its line, or of the text for a block string).
fn after_string(bytes: &[u8], start: usize) -> usize {
    let block = bytes[start..].starts_with(b"\"\"\"");
    let mut i = start + if block { 3 } else { 1 };
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if block {
            if bytes[i..].starts_with(b"\"\"\"") {
                return i + 3;
            }
        } else if bytes[i] == b'"' {
            return i + 1;
        } else if bytes[i] == b'\n' {
            return i;
        }
        i += 1;
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(q: &str) -> usize {
        shape(q, usize::MAX).tokens
    }

    fn nesting(q: &str) -> usize {
        shape(q, usize::MAX).nesting
    }

    #[test]
    fn tokens_are_counted_as_the_lexer_sees_them() {
        assert_eq!(tokens("{ me { id } }"), 6);
        assert_eq!(
            tokens("query Q($a: Int = -1.5e3) { a(x: $a) @skip(if: true) }"),
            26
        );
        assert_eq!(tokens("{ ...A } fragment A on Query { a }"), 11);
        assert_eq!(tokens(r#"{ a(s: "x \" y, # z") }"#), 8);
        assert_eq!(tokens("{ a(s: \"\"\" many\n words \\\"\"\" \"\"\") }"), 8);
        assert_eq!(tokens("# a comment { { {\n{ a, b,,, c }"), 5);
        assert_eq!(tokens(""), 0);
        assert_eq!(tokens("{ a: b }"), 5);
    }

    #[test]
    fn counting_stops_past_the_limit() {
        let text = "{ a }".repeat(1000);
        assert_eq!(shape(&text, 10).tokens, 11);
        assert_eq!(shape(&text, usize::MAX).tokens, 3000);
    }

    #[test]
    fn nesting_ignores_strings_and_comments() {
        assert_eq!(nesting("{ a { b } }"), 2);
        assert_eq!(nesting(r#"{ a(s: "{{{{") }"#), 2);
        assert_eq!(nesting("# {{{{\n{ a }"), 1);
        assert_eq!(nesting(r#"{ a(s: """ {{{ \""" """) }"#), 2);
        assert_eq!(nesting(&"{a".repeat(1000)), 1000);
    }
}
