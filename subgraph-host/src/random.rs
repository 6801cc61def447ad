//! Deterministic draws for the data sets and the injected faults: the `k`-th output of
//! SplitMix64 (Steele, Lea and Flood, OOPSLA 2014) from a seed, as a pure function of
//! `(seed, k)`.
//!
//! Why not a generator from the `rand` crate: what is drawn here is drawn *by index*.
//! Post `p(k)`'s author and request `k`'s fault must not depend on the order in which
//! posts are built or requests arrive on two cores, and a counter-based draw gives the
//! `k`-th value without the `k − 1` before it. The formula is fixed and short, so a
//! data set or a fault sequence can be recomputed anywhere (loadgen, a notebook) from
//! the seed alone, whatever crate versions are in use; `rand` promises no such
//! stability for its default generators across versions.

/// The `k`-th output (from 0) of SplitMix64 seeded with `seed`.
pub fn draw(seed: u64, k: u64) -> u64 {
    let mut z = seed.wrapping_add(k.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A draw mapped onto `0..n` by multiplication (Lemire), without a division.
pub fn below(draw: u64, n: u64) -> u64 {
    ((draw as u128 * n as u128) >> 64) as u64
}

/// A draw mapped onto `[0, 1)` with 53 bits of precision.
pub fn unit(draw: u64) -> f64 {
    (draw >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_reference_outputs() {
        // The first outputs of SplitMix64 seeded with 1234567 (as in the reference
        // implementation, `splitmix64.c`, Vigna).
        let expected = [
            6457827717110365317u64,
            3203168211198807973,
            9817491932198370423,
            4593380528125082431,
            16408922859458223821,
        ];
        for (k, e) in expected.into_iter().enumerate() {
            assert_eq!(draw(1234567, k as u64), e, "output {k}");
        }
    }

    #[test]
    fn below_and_unit_stay_in_range() {
        for k in 0..10_000 {
            let d = draw(7, k);
            assert!(below(d, 3) < 3);
            let u = unit(d);
            assert!((0.0..1.0).contains(&u));
        }
        assert_eq!(below(u64::MAX, 10), 9);
        assert_eq!(below(0, 10), 0);
    }
}
