//! The commerce graph's keys: how each entity's key fields are spelled, and how a
//! spelling is read back into the row it names.
//!
//! - A product's `upc` is a 12-digit UPC-A code: `0`, its number (from 1) in ten digits,
//!   and the check digit (`000000000017` is product 1). Only a code with a correct check
//!   digit names a product.
//! - A product's `sku` is its category's code and eight hexadecimal digits
//!   (`KIT-3A9F04C1`): the row index scrambled by an invertible map of 32-bit integers
//!   that the seed chooses, so SKUs look unordered but are read back without a table.
//! - A user's `id` is `u1`, `u2`, … ([`subgraph_host::ids`]); a user's `username` is two
//!   words and the user's number (`amber_otter17`), unique because of the number.
//! - A review's `id` is `r1`, `r2`, …, numbered from 1 in creation order.
//!
//! Every reader is strict: a spelling names a row only if writing that row gives back
//! exactly the same text, so `00000000001 7`, `kit-3a9f04c1` or `Amber_otter17` name
//! nothing.

/// The UPC-A code of product row `index` (from 0).
pub fn upc(index: u32) -> String {
    let digits = format!("0{:010}", u64::from(index) + 1);
    let check = check_digit(digits.as_bytes());
    format!("{digits}{check}")
}

/// The product row a UPC-A code names (before any range check), if it is well formed.
pub fn upc_row(code: &str) -> Option<u32> {
    let bytes = code.as_bytes();
    if bytes.len() != 12 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if check_digit(&bytes[..11]) != bytes[11] - b'0' {
        return None;
    }
    let number: u64 = code[..11].parse().ok()?;
    let row = u32::try_from(number.checked_sub(1)?).ok()?;
    (upc(row) == code).then_some(row)
}

/// The UPC-A check digit of 11 digits: three times the digits in odd positions plus
/// those in even positions, up to the next multiple of ten.
fn check_digit(digits: &[u8]) -> u8 {
    let sum: u32 = digits
        .iter()
        .enumerate()
        .map(|(i, d)| u32::from(d - b'0') * if i % 2 == 0 { 3 } else { 1 })
        .sum();
    ((10 - sum % 10) % 10) as u8
}

/// The invertible map that turns row indexes into SKU numbers: XOR with the seed's
/// mask, then multiplication by an odd constant (a bijection of the 32-bit integers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkuScramble {
    mask: u32,
}

/// An odd multiplier (the 32-bit golden ratio), and its inverse modulo 2³².
const MULTIPLIER: u32 = 0x9E37_79B1;
const INVERSE: u32 = inverse(MULTIPLIER);

/// The inverse of odd `a` modulo 2³², by Newton's iteration (each step doubles the
/// number of correct low bits; `a` itself is right to 3 bits).
const fn inverse(a: u32) -> u32 {
    let mut x = a;
    let mut i = 0;
    while i < 4 {
        x = x.wrapping_mul(2u32.wrapping_sub(a.wrapping_mul(x)));
        i += 1;
    }
    x
}

impl SkuScramble {
    pub fn new(mask: u32) -> SkuScramble {
        SkuScramble { mask }
    }

    /// The SKU of product row `index` in category `code`.
    pub fn sku(&self, code: &str, index: u32) -> String {
        format!(
            "{code}-{:08X}",
            (index ^ self.mask).wrapping_mul(MULTIPLIER)
        )
    }

    /// The category code and product row a SKU names (before any range check), if it
    /// is well formed: three capital letters, a dash, eight capital hexadecimal digits.
    pub fn row<'a>(&self, sku: &'a str) -> Option<(&'a str, u32)> {
        let (code, hex) = sku.split_once('-')?;
        let well_formed = code.len() == 3
            && code.bytes().all(|b| b.is_ascii_uppercase())
            && hex.len() == 8
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b));
        if !well_formed {
            return None;
        }
        let number = u32::from_str_radix(hex, 16).ok()?;
        Some((code, number.wrapping_mul(INVERSE) ^ self.mask))
    }
}

/// The username of user row `index` with its two drawn words.
pub fn username(word: &str, animal: &str, index: u32) -> String {
    format!("{word}_{animal}{}", u64::from(index) + 1)
}

/// The user row a username's trailing number names (the caller checks the words).
pub fn username_row(name: &str) -> Option<u32> {
    let digits = name.trim_start_matches(|c: char| !c.is_ascii_digit());
    let number = subgraph_host::ids::number("", digits)?;
    Some(number - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upcs_carry_a_check_digit() {
        assert_eq!(upc(0), "000000000017");
        // A real UPC-A code, to check the check digit's rule.
        assert_eq!(check_digit(b"03600029145"), 2);
        for row in [0, 1, 9, 41, 999, 1_000_000, 9_999_999] {
            assert_eq!(upc_row(&upc(row)), Some(row), "{}", upc(row));
        }
        for bad in [
            "000000000018",
            "00000000001",
            "0000000000170",
            "00000000001x",
            "000000000000",
            " 00000000017",
            "",
        ] {
            assert_eq!(upc_row(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn skus_read_back_to_their_row() {
        assert_eq!(MULTIPLIER.wrapping_mul(INVERSE), 1);
        let scramble = SkuScramble::new(0xDEAD_BEEF);
        for row in [0, 1, 2, 77, 65_535, 4_000_000] {
            let sku = scramble.sku("KIT", row);
            assert_eq!(scramble.row(&sku), Some(("KIT", row)), "{sku}");
        }
        let sku = scramble.sku("GAR", 5);
        for bad in [
            sku.to_lowercase(),
            sku.replace('-', ""),
            format!("{sku}0"),
            format!("GA-{}", &sku[4..]),
        ] {
            assert_eq!(scramble.row(&bad), None, "{bad:?}");
        }
        // Another seed's mask spells the same row differently.
        assert_ne!(SkuScramble::new(1).sku("KIT", 0), scramble.sku("KIT", 0));
    }

    #[test]
    fn usernames_end_with_the_users_number() {
        assert_eq!(username("amber", "otter", 16), "amber_otter17");
        assert_eq!(username_row("amber_otter17"), Some(16));
        for bad in [
            "amber_otter",
            "amber_otter0",
            "amber_otter017",
            "amber_otter1x",
        ] {
            assert_eq!(username_row(bad), None, "{bad:?}");
        }
    }
}
