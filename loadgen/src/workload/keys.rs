//! Key popularity: which id an operation reads or writes, drawn from a named key set.
//!
//! A key set is a range of integers (`first ..= first + count - 1`, so `p{post}` with
//! `count = 10000` names `p1`…`p10000`), or a **list** of keys written out (`values =
//! ["000000000017", …]`, or `values_file`, one key a line: the UPCs of someone else's
//! graph), and a distribution over it:
//!
//! - `uniform`: every key alike;
//! - `zipf`: key `first + k - 1` (the list's `k`-th) has weight `1 / k^exponent` (the
//!   first key is the most popular; YCSB's usual exponent is 0.99), sampled by
//!   `rand_distr::Zipf`;
//! - `hotspot`: a `hot_share` of the draws falls uniformly on the first `hot_fraction`
//!   of the keys, the rest uniformly on the others (YCSB's hotspot), from rand's
//!   `Bernoulli` and `Uniform`;
//! - `sequence`: each connection walks the keys in order, wrapping around, from a
//!   start of its own (spread over the set by the connection's index), so the run
//!   visits every key without a random draw ([`KeySet::sequence_start`]; the walk is
//!   kept by [`super::mix`]).
//!
//! A draw is an integer: the key itself for a range, the key's index in a list
//! (`0 ..= count - 1`), which [`super::template`] renders as the listed text.
//!
//! The sampling is rand's and rand_distr's; this file only checks the parameters and
//! maps a draw to a key.

use std::sync::Arc;

use rand::distr::{Bernoulli, Distribution, Uniform};
use rand::Rng;
use rand_distr::Zipf;
use serde::{Deserialize, Serialize};

/// A key set as the experiment file writes it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KeyFile {
    /// `uniform`, `zipf`, `hotspot` or `sequence`.
    pub distribution: String,
    /// How many keys: the set is `first ..= first + count - 1` (not with a list).
    #[serde(default)]
    pub count: Option<i64>,
    /// The smallest key (default 1; not with a list).
    #[serde(default)]
    pub first: Option<i64>,
    /// The keys written out, instead of a range.
    #[serde(default)]
    pub values: Option<Vec<String>>,
    /// A file of keys, one a line (blank lines and `#` comments skipped), relative to
    /// the file that names it; read into `values` before the set is built.
    #[serde(default)]
    pub values_file: Option<String>,
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
    /// Every key in order, per connection.
    Sequence,
}

/// A named key set: its range and distribution.
#[derive(Debug, Clone)]
pub struct KeySet {
    pub name: String,
    pub first: u64,
    pub count: u64,
    pub distribution: KeyDistribution,
    /// A list's keys: a draw `i` names `values[i]` (then `first` is 0).
    pub values: Option<Arc<[Box<str>]>>,
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
        if file.values_file.is_some() {
            return Err(format!(
                "{at}.values_file: the file was not read (give the set to Workload::from_file_in)"
            ));
        }
        let values: Option<Arc<[Box<str>]>> = match &file.values {
            Some(list) => {
                for (key, present) in [
                    ("count", file.count.is_some()),
                    ("first", file.first.is_some()),
                ] {
                    if present {
                        return Err(format!(
                            "{at}.{key} does not apply to a list of keys (values): the list sets them"
                        ));
                    }
                }
                if list.is_empty() {
                    return Err(format!("{at}.values is empty"));
                }
                if let Some(i) = list.iter().position(|v| v.is_empty()) {
                    return Err(format!("{at}.values[{i}] is empty"));
                }
                // A key is written into JSON strings and headers as it is.
                if let Some(i) = list
                    .iter()
                    .position(|v| v.chars().any(|c| c == '"' || c == '\\' || c.is_control()))
                {
                    return Err(format!(
                        "{at}.values[{i}] = {:?}: a key may not hold quotes, backslashes or control characters",
                        list[i]
                    ));
                }
                Some(list.iter().map(|v| v.as_str().into()).collect())
            }
            None => None,
        };
        let (first, count) = match &values {
            Some(list) => (0, list.len() as u64),
            None => {
                let count = file.count.ok_or_else(|| {
                    format!("{at}: needs count (a range of keys) or values (a list)")
                })?;
                if count < 1 {
                    return Err(format!("{at}.count = {count}: must be at least 1"));
                }
                let first = file.first.unwrap_or(1);
                if first < 0 {
                    return Err(format!("{at}.first = {first}: must not be negative"));
                }
                (first as u64, count as u64)
            }
        };
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
            "sequence" => {
                unexpected("exponent", file.exponent.is_some())?;
                unexpected("hot_fraction", file.hot_fraction.is_some())?;
                unexpected("hot_share", file.hot_share.is_some())?;
                KeyDistribution::Sequence
            }
            other => {
                return Err(format!(
                    "{at}.distribution = {other:?}: use uniform, zipf, hotspot or sequence"
                ))
            }
        };
        Ok(KeySet {
            name: name.to_string(),
            first,
            count,
            distribution,
            values,
        })
    }

    /// Whether keys come in order rather than drawn ([`KeyDistribution::Sequence`]).
    pub fn is_sequence(&self) -> bool {
        matches!(self.distribution, KeyDistribution::Sequence)
    }

    /// Where connection `index` starts its walk of a sequence: spread over the set
    /// (the index times the golden ratio's fraction, modulo the count), so that
    /// connections start apart.
    pub fn sequence_start(&self, index: u64) -> u64 {
        index.wrapping_mul(0x9E37_79B9_7F4A_7C15) % self.count
    }

    /// The `position`-th key of a sequence walk.
    pub fn sequence_key(&self, position: u64) -> u64 {
        self.first + position % self.count
    }

    /// The text of drawn key `key`: the listed value, or the number.
    pub fn text(&self, key: u64) -> String {
        match &self.values {
            Some(list) => list[(key - self.first) as usize].to_string(),
            None => key.to_string(),
        }
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
            // Walked per connection by the mix; a lone draw takes the first key.
            KeyDistribution::Sequence => self.first,
        }
    }

    /// The probability of drawing each key, in key order (`first` first): what the
    /// draws should follow, for goodness-of-fit checks.
    pub fn probabilities(&self) -> Vec<f64> {
        let n = self.count;
        match &self.distribution {
            KeyDistribution::Uniform(_) | KeyDistribution::Sequence => {
                vec![1.0 / n as f64; n as usize]
            }
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
    use rand::rngs::ChaCha8Rng;
    use rand::SeedableRng;

    fn set(distribution: &str, extra: impl Fn(&mut KeyFile)) -> KeySet {
        let mut file = KeyFile {
            distribution: distribution.into(),
            count: Some(1000),
            first: None,
            values: None,
            values_file: None,
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
            f.count = Some(3);
        });
        let c = counts(&keys, 3000, 1);
        assert_eq!(c.len(), 3);
        assert!(c.iter().all(|n| *n > 800));
    }

    #[test]
    fn a_list_is_drawn_by_index_and_read_back_as_its_text() {
        let listed = set("zipf", |f| {
            f.count = None;
            f.exponent = Some(0.99);
            f.values = Some(vec![
                "000000000017".into(),
                "000000000024".into(),
                "x".into(),
            ]);
        });
        assert_eq!((listed.first, listed.count), (0, 3));
        let c = counts(&listed, 30_000, 3);
        assert!(c[0] > c[1] && c[1] > c[2], "{c:?}");
        assert_eq!(listed.text(0), "000000000017");
        assert_eq!(listed.text(2), "x");
        assert_eq!(set("uniform", |_| {}).text(42), "42");
        let bad = |tweak: &dyn Fn(&mut KeyFile)| {
            let mut f = KeyFile {
                distribution: "uniform".into(),
                count: None,
                first: None,
                values: Some(vec!["a".into()]),
                values_file: None,
                exponent: None,
                hot_fraction: None,
                hot_share: None,
            };
            tweak(&mut f);
            KeySet::new("k", &f).unwrap_err()
        };
        assert!(bad(&|f| f.count = Some(3)).contains("keys.k.count does not apply to a list"));
        assert!(bad(&|f| f.values = Some(vec![])).contains("keys.k.values is empty"));
        assert!(bad(&|f| f.values = None).contains("keys.k: needs count"));
    }

    #[test]
    fn a_sequence_walks_every_key_in_order_from_a_start_per_connection() {
        let walk = set("sequence", |f| f.count = Some(10));
        let starts: Vec<u64> = (0..4).map(|i| walk.sequence_start(i)).collect();
        assert_eq!(starts[0], 0);
        assert!(starts.windows(2).all(|w| w[0] != w[1]), "{starts:?}");
        let keys: Vec<u64> = (7..17).map(|p| walk.sequence_key(p)).collect();
        assert_eq!(keys, [8, 9, 10, 1, 2, 3, 4, 5, 6, 7]);
        assert!(walk.is_sequence() && !set("uniform", |_| {}).is_sequence());
    }
}
