//! The lab's id scheme, shared by both subgraphs: users are `u1`, `u2`, … and posts
//! `p1`, `p2`, …, numbered from 1 in creation order.
//!
//! Both data sets store their rows in vectors indexed by that number, so an id is parsed
//! into its number rather than looked up as a string. Parsing is strict: only the
//! canonical spelling names a row (`u01`, `u+1`, `u 1` and `U1` name none), exactly as
//! when rows were looked up by their id string.

/// The number in `id` after `prefix` (`number("u", "u42") == Some(42)`), or `None`
/// when `id` is not the canonical spelling of a number ≥ 1 that fits in a `u32`.
pub fn number(prefix: &str, id: &str) -> Option<u32> {
    let digits = id.strip_prefix(prefix)?;
    let first = *digits.as_bytes().first()?;
    if !(b'1'..=b'9').contains(&first) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The row index (from 0) that `id` names, if it is canonical.
pub fn index(prefix: &str, id: &str) -> Option<usize> {
    number(prefix, id).map(|n| n as usize - 1)
}

/// The id of row `index` (from 0): `id("p", 0) == "p1"`.
pub fn id(prefix: &str, index: usize) -> String {
    format!("{prefix}{}", index + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_canonical_ids_name_a_row() {
        assert_eq!(number("u", "u1"), Some(1));
        assert_eq!(number("u", "u4294967295"), Some(u32::MAX));
        for bad in [
            "u",
            "u0",
            "u01",
            "u+1",
            "u-1",
            "u 1",
            "U1",
            "p1",
            "u1x",
            "",
            "u4294967296",
        ] {
            assert_eq!(number("u", bad), None, "{bad:?}");
        }
        assert_eq!(index("p", "p3"), Some(2));
        assert_eq!(id("p", 2), "p3");
    }
}
