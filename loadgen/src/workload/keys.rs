//! Key popularity: which id an operation reads or writes, drawn from a named key set.
//!
//! A key set is a range of integers (`first ..= first + count - 1`, so `p{post}` with
//! `count = 10000` names `p1`…`p10000`) and a distribution over it:
//!
//! - `uniform`: every key alike;
//! - `zipf`: key `first + k - 1` has weight `1 / k^exponent` (the first key is the
//!   most popular; YCSB's usual exponent is 0.99), sampled by `rand_distr::Zipf`;
//! - `hotspot`: a `hot_share` of the draws falls uniformly on the first `hot_fraction`
//!   of the keys, the rest uniformly on the others (YCSB's hotspot), from rand's
//!   `Bernoulli` and `Uniform`.
//!
//! The sampling is rand's and rand_distr's; this file only checks the parameters and
//! maps a draw to a key.

use rand::distr::{Bernoulli, Distribution, Uniform};
use rand::Rng;
use rand_distr::Zipf;
use serde::{Deserialize, Serialize};

/// A key set as the experiment file writes it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KeyFile {
    /// `uniform`, `zipf` or `hotspot`.
    pub distribution: String,
    /// How many keys: the set is `first ..= first + count - 1`.
    pub count: i64,
    /// The smallest key (default 1).
    #[serde(default)]
    pub first: Option<i64>,
    /// Zipf: the exponent (0.99 in YCSB).
    #[serde(default)]
    pub exponent: Option<f64>,
    /// Hotspot: the fraction of the keys that is hot (0 < f < 1).
    #[serde(default)]
    pub hot_fraction: Option<f64>,
    /// Hotspot: the fraction of the draws that lands on the hot keys (0 ≤ s ≤ 1).
    #[serde(default)]
    pub hot_share: Option<f64>,
}

/// The distribution of one key set, ready to sample.
#[derive(Debug, Clone)]
pub enum KeyDistribution {
    Uniform(Uniform<u64>),
    Zipf {
        zipf: Zipf<f64>,
        exponent: f64,
    },
    Hotspot {
        hot: Bernoulli,
        hot_keys: Uniform<u64>,
        cold_keys: Uniform<u64>,
        /// How many keys are hot (the first ones), and the share of draws they get.
        hot_count: u64,
        hot_share: f64,
    },
}

/// A named key set: its range and distribution.
#[derive(Debug, Clone)]
pub struct KeySet {
    pub name: String,
    pub first: u64,
    pub count: u64,
    pub distribution: KeyDistribution,
}

impl KeySet {
    /// Check a key set's parameters; errors name the key at fault (`keys.post.exponent`).
    pub fn new(name: &str, file: &KeyFile) -> Result<KeySet, String> {
        let at = format!("keys.{name}");
        if name.is_empty()
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            || name == super::template::VERSION
        {
            return Err(format!(
                "{at}: a key set's name uses letters, digits and '_' (and is not {:?})",
                super::template::VERSION
            ));
        }
        if file.count < 1 {
            return Err(format!("{at}.count = {}: must be at least 1", file.count));
        }
        let first = file.first.unwrap_or(1);
        if first < 0 {
            return Err(format!("{at}.first = {first}: must not be negative"));
        }
        let (first, count) = (first as u64, file.count as u64);
        let last = first + count - 1;
        let unexpected = |key: &str, present: bool| {
            if present {
                Err(format!(
                    "{at}.{key} does not apply to distribution {:?}",
                    file.distribution
                ))
            } else {
                Ok(())
            }
        };
        let distribution = match file.distribution.as_str() {
            "uniform" => {
                unexpected("exponent", file.exponent.is_some())?;
                unexpected("hot_fraction", file.hot_fraction.is_some())?;
                unexpected("hot_share", file.hot_share.is_some())?;
                KeyDistribution::Uniform(uniform(first, last, &at)?)
            }
            "zipf" => {
                unexpected("hot_fraction", file.hot_fraction.is_some())?;
                unexpected("hot_share", file.hot_share.is_some())?;
                let exponent = file
                    .exponent
                    .ok_or_else(|| format!("{at}: zipf needs exponent (YCSB uses 0.99)"))?;
                if !(exponent.is_finite() && exponent >= 0.0) {
                    return Err(format!("{at}.exponent = {exponent}: must be a number ≥ 0"));
                }
                let zipf = Zipf::new(count as f64, exponent)
                    .map_err(|e| format!("{at}: zipf over {count} keys: {e}"))?;
                KeyDistribution::Zipf { zipf, exponent }
            }
            "hotspot" => {
                unexpected("exponent", file.exponent.is_some())?;
                let fraction = file
                    .hot_fraction
                    .ok_or_else(|| format!("{at}: hotspot needs hot_fraction"))?;
                let share = file
                    .hot_share
                    .ok_or_else(|| format!("{at}: hotspot needs hot_share"))?;
                if !(fraction > 0.0 && fraction < 1.0) {
                    return Err(format!(
                        "{at}.hot_fraction = {fraction}: must be between 0 and 1"
                    ));
                }
                let hot_count = ((count as f64) * fraction).round() as u64;
                if hot_count == 0 || hot_count >= count {
                    return Err(format!(
                        "{at}.hot_fraction = {fraction}: leaves {hot_count} of {count} keys hot; \
                         both the hot and the cold part need at least one key"
                    ));
                }
                let hot = Bernoulli::new(share)
                    .map_err(|_| format!("{at}.hot_share = {share}: must be from 0 to 1"))?;
                KeyDistribution::Hotspot {
                    hot,
                    hot_keys: uniform(first, first + hot_count - 1, &at)?,
                    cold_keys: uniform(first + hot_count, last, &at)?,
                    hot_count,
                    hot_share: share,
                }
            }
            other => {
                return Err(format!(
                    "{at}.distribution = {other:?}: use uniform, zipf or hotspot"
                ))
            }
        };
        Ok(KeySet {
            name: name.to_string(),
            first,
            count,
            distribution,
        })
    }

    /// Draw one key.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        match &self.distribution {
            KeyDistribution::Uniform(u) => u.sample(rng),
            // Zipf gives a float rank in [1, count].
            KeyDistribution::Zipf { zipf, .. } => {
                self.first + (zipf.sample(rng) as u64).clamp(1, self.count) - 1
            }
            KeyDistribution::Hotspot {
                hot,
                hot_keys,
                cold_keys,
                ..
            } => {
                if hot.sample(rng) {
                    hot_keys.sample(rng)
                } else {
                    cold_keys.sample(rng)
                }
            }
        }
    }

    /// The probability of drawing each key, in key order (`first` first): what the
    /// draws should follow, for goodness-of-fit checks.
    pub fn probabilities(&self) -> Vec<f64> {
        let n = self.count;
        match &self.distribution {
            KeyDistribution::Uniform(_) => vec![1.0 / n as f64; n as usize],
            KeyDistribution::Zipf { exponent, .. } => {
                let weights: Vec<f64> = (1..=n).map(|k| (k as f64).powf(-exponent)).collect();
                let total: f64 = weights.iter().sum();
                weights.into_iter().map(|w| w / total).collect()
            }
            KeyDistribution::Hotspot {
                hot_count,
                hot_share,
                ..
            } => (1..=n)
                .map(|rank| {
                    if rank <= *hot_count {
                        hot_share / *hot_count as f64
                    } else {
                        (1.0 - hot_share) / (n - hot_count) as f64
                    }
                })
                .collect(),
        }
    }
}

fn uniform(low: u64, high: u64, at: &str) -> Result<Uniform<u64>, String> {
    Uniform::new_inclusive(low, high).map_err(|e| format!("{at}: {low}..={high}: {e}"))
}

/// Pearson's χ² of observed counts against expected probabilities (bins in key order).
pub fn chi_square(observed: &[u64], probabilities: &[f64]) -> f64 {
    let n: u64 = observed.iter().sum();
    observed
        .iter()
        .zip(probabilities)
        .map(|(o, p)| {
            let e = p * n as f64;
            (*o as f64 - e).powi(2) / e
        })
        .sum()
}

/// The χ² value a fit exceeds with probability 0.001 at `df` degrees of freedom
/// (Wilson–Hilferty's approximation, good to a fraction of a percent for df > 30).
pub fn chi_square_critical_0_001(df: f64) -> f64 {
    const Z: f64 = 3.090_232; // the standard normal's 0.999 quantile
    let a = 2.0 / (9.0 * df);
    df * (1.0 - a + Z * a.sqrt()).powi(3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn set(distribution: &str, extra: impl Fn(&mut KeyFile)) -> KeySet {
        let mut file = KeyFile {
            distribution: distribution.into(),
            count: 1000,
            first: None,
            exponent: None,
            hot_fraction: None,
            hot_share: None,
        };
        extra(&mut file);
        KeySet::new("k", &file).unwrap()
    }

    fn counts(keys: &KeySet, draws: usize, seed: u64) -> Vec<u64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut counts = vec![0u64; keys.count as usize];
        for _ in 0..draws {
            let k = keys.sample(&mut rng);
            assert!((keys.first..keys.first + keys.count).contains(&k), "{k}");
            counts[(k - keys.first) as usize] += 1;
        }
        counts
    }

    #[test]
    fn zipf_draws_fit_the_zipf_law() {
        let zipf = set("zipf", |f| f.exponent = Some(0.99));
        let observed = counts(&zipf, 300_000, 42);
        let expected = zipf.probabilities();
        let critical = chi_square_critical_0_001(999.0);
        let fit = chi_square(&observed, &expected);
        assert!(
            fit < critical,
            "χ² {fit:.0} ≥ {critical:.0}: the draws do not follow Zipf 0.99"
        );
        // The test has teeth: the same draws against a uniform law, or against Zipf with
        // another exponent, or shifted by one key, fail it by far.
        let uniform = vec![1.0 / 1000.0; 1000];
        assert!(chi_square(&observed, &uniform) > 10.0 * critical);
        let other = set("zipf", |f| f.exponent = Some(0.8)).probabilities();
        assert!(chi_square(&observed, &other) > critical);
        let mut shifted = expected.clone();
        shifted.rotate_right(1);
        assert!(chi_square(&observed, &shifted) > critical);
        // Key 1 is the most popular: about 1/H(1000, 0.99) ≈ 13% of the draws.
        assert!((observed[0] as f64 / 300_000.0 - expected[0]).abs() < 0.005);
    }

    #[test]
    fn uniform_and_hotspot_draws_fit_too() {
        let critical = chi_square_critical_0_001(999.0);
        let uniform = set("uniform", |_| {});
        assert!(chi_square(&counts(&uniform, 100_000, 7), &uniform.probabilities()) < critical);
        let hot = set("hotspot", |f| {
            f.hot_fraction = Some(0.1);
            f.hot_share = Some(0.9);
        });
        let observed = counts(&hot, 200_000, 7);
        assert!(chi_square(&observed, &hot.probabilities()) < critical);
        let share = observed[..100].iter().sum::<u64>() as f64 / 200_000.0;
        assert!((share - 0.9).abs() < 0.005, "{share}");
    }

    #[test]
    fn ranges_start_where_asked() {
        let keys = set("uniform", |f| {
            f.first = Some(0);
            f.count = 3;
        });
        let c = counts(&keys, 3000, 1);
        assert_eq!(c.len(), 3);
        assert!(c.iter().all(|n| *n > 800));
    }
}
