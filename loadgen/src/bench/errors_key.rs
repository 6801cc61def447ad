//! Whether an answer holds the bytes `"errors"`: the test every 2xx answer of a run
//! goes through before it may count as a success (see [`crate::bench::outcome`]).
//!
//! On the deep query's 98.5 KB answers this search was most of loadgen's own
//! instructions: memchr's `memmem` (its AVX2 pair search, one 32-byte block at a time)
//! ran about 47 000 instructions per answer, 85% of everything loadgen executed in user
//! space per request (callgrind, `loadgen bench` against `loadgen target --body`). On
//! x86-64 with AVX2 the search here looks at 128 bytes per step instead, for a `"`
//! followed by `e` (a rare pair in GraphQL answers: few fields start with `e`), as
//! 16-bit lanes of the step's blocks and of the same blocks one byte on, all of them
//! tested at once; only a step with such a pair (an `edges` key, say) is searched with
//! `memmem`. That is about 17 700 instructions on such an answer, and loadgen's user
//! space work per request went from 55 000 instructions to 25 500 (wrk's: 6 900, with
//! no search at all). Elsewhere, and for the tail of an answer, it is `memmem`.

use std::sync::LazyLock;

use memchr::memmem::Finder;

/// The key searched for, quotes included.
pub const KEY: &[u8] = b"\"errors\"";

/// `memmem`'s searcher for [`KEY`], built once.
static FINDER: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(KEY));

/// Whether `haystack` holds [`KEY`] anywhere.
pub fn contains(haystack: &[u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above.
            return unsafe { avx2::contains(haystack) };
        }
    }
    FINDER.find(haystack).is_some()
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi16, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_or_si256,
        _mm256_set1_epi16,
    };

    use super::{FINDER, KEY};

    /// Bytes looked at per step.
    const STEP: usize = 128;

    /// [`super::contains`] with AVX2.
    ///
    /// # Safety
    ///
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn contains(haystack: &[u8]) -> bool {
        // `"` then `e`, as one little-endian 16-bit lane.
        let pair = _mm256_set1_epi16(i16::from_le_bytes([KEY[0], KEY[1]]));
        let mut at = 0;
        // A step reads 32-byte blocks at `at + k` and `at + k + 1` for k in 0, 32, 64,
        // 96: up to byte `at + STEP` inclusive, so it needs STEP + 1 bytes.
        while at + STEP < haystack.len() {
            // SAFETY: every block read lies in `haystack[at..=at + STEP]`, inside it by
            // the loop's condition.
            let base = haystack.as_ptr().add(at);
            let any = _mm256_or_si256(
                _mm256_or_si256(pairs(base, pair), pairs(base.add(32), pair)),
                _mm256_or_si256(pairs(base.add(64), pair), pairs(base.add(96), pair)),
            );
            if _mm256_movemask_epi8(any) != 0 && step_holds_key(haystack, at) {
                return true;
            }
            at += STEP;
        }
        // Every start before `at` has been tested; the rest of the answer is short.
        FINDER.find(&haystack[at..]).is_some()
    }

    /// Whether the key starts in the step at `at`, one with a candidate pair (rare):
    /// apart, so that the loop above stays a few instructions per block.
    #[cold]
    #[inline(never)]
    fn step_holds_key(haystack: &[u8], at: usize) -> bool {
        let end = (at + STEP - 1 + KEY.len()).min(haystack.len());
        FINDER.find(&haystack[at..end]).is_some()
    }

    /// Non-zero lanes where one of the 32 positions from `block` on holds `"` followed
    /// by `e`: the even positions' pairs compared as 16-bit lanes of the block, the odd
    /// ones' as lanes of the block one byte on.
    ///
    /// # Safety
    ///
    /// The CPU must have AVX2, and the 33 bytes from `block` on must be readable.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn pairs(block: *const u8, pair: __m256i) -> __m256i {
        // Unaligned loads: any address will do.
        let even = _mm256_loadu_si256(block.cast::<__m256i>());
        let odd = _mm256_loadu_si256(block.add(1).cast::<__m256i>());
        _mm256_or_si256(
            _mm256_cmpeq_epi16(even, pair),
            _mm256_cmpeq_epi16(odd, pair),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain search, to hold the fast one to.
    fn reference(haystack: &[u8]) -> bool {
        haystack.windows(KEY.len()).any(|w| w == KEY)
    }

    #[test]
    fn finds_the_key_at_every_place_and_nothing_else() {
        // Filler full of near misses: quotes, `"e`, and the key cut short.
        let filler: Vec<u8> = br#""e "err "error" "errorss {"x":"e"} errors" "#
            .iter()
            .copied()
            .cycle()
            .take(700)
            .collect();
        for len in [0, 1, 7, 8, 9, 127, 128, 129, 130, 255, 256, 257, 300, 700] {
            let base = &filler[..len];
            assert_eq!(contains(base), reference(base), "len {len}");
            if len < KEY.len() {
                continue;
            }
            // The key at every start, across every block and step boundary.
            for start in 0..=len - KEY.len() {
                let mut hay = base.to_vec();
                hay[start..start + KEY.len()].copy_from_slice(KEY);
                assert!(contains(&hay), "len {len}, key at {start}");
                assert_eq!(contains(&hay), reference(&hay));
            }
        }
    }

    #[test]
    fn a_key_split_or_spoiled_is_not_found() {
        let mut hay = vec![b' '; 400];
        for start in [0, 31, 32, 120, 127, 128, 392] {
            let mut h = hay.clone();
            h[start..start + KEY.len()].copy_from_slice(b"\"errorz\"");
            assert!(!contains(&h), "{start}");
        }
        hay[200..207].copy_from_slice(b"\"errors");
        assert!(!contains(&hay));
        assert!(!contains(b""));
    }
}
