//! How sure a comparison is: 95% intervals on ratios taken over rounds, and the
//! verdict `loadgen compare` gives (improved, regressed, within noise, no change).
//!
//! **The method.** Ratios are compared on a log scale, where a ratio and its inverse
//! are equally far from 1 and round-to-round noise on shared cores is closer to
//! symmetric than on the linear scale.
//! - *Paired*, within one run: each round gives one ratio (a configuration over its
//!   baseline measured in the same round, so drift between rounds cancels). The
//!   estimate is the geometric mean of those ratios and the interval Student's t on
//!   their logarithms, with n − 1 degrees of freedom.
//! - *Unpaired*, across two runs: B's per-round values over A's. The estimate is the
//!   ratio of geometric means and the interval Welch's t on the logarithms, with the
//!   Welch–Satterthwaite degrees of freedom rounded down (the wider interval).
//!
//! **Why not a bootstrap or a sign test.** The matrix runs few rounds. With 3, no
//! distribution-free method reaches 95%: the sign test's widest interval, min–max,
//! covers the median 75% of the time, and an exact sign-flip permutation test cannot
//! give p below 0.25. A percentile bootstrap over 3 values cannot leave their
//! min–max and covers less than it claims. Student's t does give a 95% interval from
//! 2 rounds, at the price of assuming the log ratios are roughly normal. The
//! assumption is checked on the machine, not taken on trust: `loadgen calibrate`
//! reads an A/A run (`experiments/a-a.toml`, the same configuration several times)
//! and counts how often an interval misses the true ratio of 1.

use serde::{Deserialize, Serialize};

/// The confidence of every interval here.
pub const LEVEL: f64 = 0.95;

/// The method's name, as the pages and `summary.json` state it.
pub const PAIRED_METHOD: &str =
    "95% interval: Student's t on the logarithms of the per-round ratios \
     (each round paired with its baseline's), geometric mean as the estimate";
pub const UNPAIRED_METHOD: &str = "95% interval: Welch's t on the logarithms of the two runs' \
     per-round values (rounds not paired), ratio of geometric means as the estimate";

/// A ratio with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    /// Rounds behind it (pairs for a paired interval; the smaller run's rounds otherwise).
    pub rounds: u32,
}

impl Interval {
    /// Whether 1 (no difference) lies outside the interval.
    pub fn excludes_one(&self) -> bool {
        self.low > 1.0 || self.high < 1.0
    }

    /// The interval's half-width on the log scale, as a share (0.05: ±5%).
    pub fn half_width(&self) -> f64 {
        ((self.high / self.low).ln() / 2.0).exp() - 1.0
    }

    /// `4.12x [3.98–4.27]`.
    pub fn text(&self, digits: usize) -> String {
        format!(
            "{:.*}x [{:.*}–{:.*}]",
            digits, self.estimate, digits, self.low, digits, self.high
        )
    }
}

/// The 97.5% quantile of Student's t with `df` degrees of freedom (two-sided 95%).
/// Exact to three decimals up to 30; beyond, the Cornish–Fisher expansion around the
/// normal quantile, within 0.001 of the exact value.
pub fn t_quantile(df: u32) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => TABLE[df as usize - 1],
        _ => {
            let (z, n) = (1.959_964_f64, f64::from(df));
            z + (z.powi(3) + z) / (4.0 * n)
                + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * n * n)
        }
    }
}

fn logs(values: &[f64]) -> Vec<f64> {
    values
        .iter()
        .filter(|v| v.is_finite() && **v > 0.0)
        .map(|v| v.ln())
        .collect()
}

/// Mean and sample variance.
fn moments(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var)
}

/// The interval of per-round ratios paired within rounds; `None` under 2 rounds.
pub fn paired(ratios: &[f64]) -> Option<Interval> {
    let l = logs(ratios);
    if l.len() < 2 {
        return None;
    }
    let (mean, var) = moments(&l);
    let half = t_quantile(l.len() as u32 - 1) * (var / l.len() as f64).sqrt();
    Some(Interval {
        estimate: mean.exp(),
        low: (mean - half).exp(),
        high: (mean + half).exp(),
        rounds: l.len() as u32,
    })
}

/// The interval of B over A from unpaired rounds; `None` unless each side has 2.
pub fn unpaired(a: &[f64], b: &[f64]) -> Option<Interval> {
    let (la, lb) = (logs(a), logs(b));
    if la.len() < 2 || lb.len() < 2 {
        return None;
    }
    let ((ma, va), (mb, vb)) = (moments(&la), moments(&lb));
    let (na, nb) = (la.len() as f64, lb.len() as f64);
    let (sa, sb) = (va / na, vb / nb);
    let se = (sa + sb).sqrt();
    // Welch–Satterthwaite; two identical constant samples have no variance at all.
    let df = if se > 0.0 {
        ((sa + sb).powi(2) / (sa * sa / (na - 1.0) + sb * sb / (nb - 1.0))).floor()
    } else {
        na + nb - 2.0
    };
    let half = t_quantile(df.max(1.0) as u32) * se;
    let diff = mb - ma;
    Some(Interval {
        estimate: diff.exp(),
        low: (diff - half).exp(),
        high: (diff + half).exp(),
        rounds: la.len().min(lb.len()) as u32,
    })
}

/// What a comparison concludes, in criterion's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole interval lies beyond the noise threshold, on the better side.
    Improved,
    /// The whole interval lies beyond the noise threshold, on the worse side.
    Regressed,
    /// The interval excludes 1 but reaches into the noise threshold: a difference
    /// too small to act on.
    WithinNoise,
    /// The interval holds 1.
    NoChange,
    /// Too few rounds for an interval (under 2 on a side).
    TooFewRounds,
}

impl Verdict {
    /// Judge B/A: `higher_is_better` for req/s, not for latency and CPU; `noise` is
    /// the threshold as a share (0.02: a change must exceed 2% to count).
    pub fn of(interval: Option<&Interval>, higher_is_better: bool, noise: f64) -> Verdict {
        let Some(i) = interval else {
            return Verdict::TooFewRounds;
        };
        if !i.excludes_one() {
            return Verdict::NoChange;
        }
        let (up, down) = (i.low > 1.0 + noise, i.high < 1.0 / (1.0 + noise));
        match (up, down, higher_is_better) {
            (true, _, true) | (_, true, false) => Verdict::Improved,
            (true, _, false) | (_, true, true) => Verdict::Regressed,
            _ => Verdict::WithinNoise,
        }
    }

    pub fn text(self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::WithinNoise => "within noise",
            Verdict::NoChange => "no change",
            Verdict::TooFewRounds => "too few rounds",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn t_quantiles_match_the_tables() {
        assert_eq!(t_quantile(2), 4.303);
        assert_eq!(t_quantile(30), 2.042);
        // Published values for 40, 60, 120 and 1000 degrees of freedom.
        for (df, exact) in [(40, 2.021), (60, 2.000), (120, 1.980), (1000, 1.962)] {
            assert!(
                close(t_quantile(df), exact, 0.0015),
                "{df}: {}",
                t_quantile(df)
            );
        }
        assert!(t_quantile(0).is_infinite());
    }

    #[test]
    fn a_paired_interval_is_t_on_log_ratios() {
        // Logs 0, ln 2 and ln 4: mean ln 2, sd ln 2, so ±4.303·ln2/√3 around 2.
        let i = paired(&[1.0, 2.0, 4.0]).unwrap();
        let half = 4.303 * 2f64.ln() / 3f64.sqrt();
        assert!(close(i.estimate, 2.0, 1e-12));
        assert!(close(i.low, (2f64.ln() - half).exp(), 1e-12));
        assert!(close(i.high, (2f64.ln() + half).exp(), 1e-12));
        assert_eq!(i.rounds, 3);
        assert!(!i.excludes_one());
        // Steady ratios give a narrow interval that excludes 1.
        let steady = paired(&[4.0, 4.1, 3.95, 4.05]).unwrap();
        assert!(steady.excludes_one() && steady.low > 3.8 && steady.high < 4.2);
        assert!(paired(&[4.0]).is_none());
        // A round without a figure does not count.
        assert_eq!(paired(&[4.0, f64::NAN, 0.0]), None);
    }

    #[test]
    fn an_unpaired_interval_is_welch_on_logs() {
        let i = unpaired(&[100.0, 110.0, 90.0], &[200.0, 220.0, 180.0]).unwrap();
        assert!(close(i.estimate, 2.0, 1e-12), "{i:?}");
        assert!(i.low > 1.5 && i.high < 2.7 && i.excludes_one(), "{i:?}");
        // Same values on both sides: the interval is centred on 1 and holds it.
        let same = unpaired(&[100.0, 110.0, 90.0], &[100.0, 110.0, 90.0]).unwrap();
        assert!(close(same.estimate, 1.0, 1e-12) && !same.excludes_one());
        // Constant samples: a zero-width interval on the ratio itself.
        let constant = unpaired(&[5.0, 5.0], &[10.0, 10.0]).unwrap();
        assert!(close(constant.low, 2.0, 1e-12) && close(constant.high, 2.0, 1e-12));
        assert!(unpaired(&[1.0], &[1.0, 2.0]).is_none());
    }

    #[test]
    fn verdicts_follow_the_interval_and_the_noise_threshold() {
        let i = |low, high| Interval {
            estimate: f64::sqrt(low * high),
            low,
            high,
            rounds: 3,
        };
        let v = |x: Interval, higher| Verdict::of(Some(&x), higher, 0.02);
        assert_eq!(v(i(1.05, 1.10), true), Verdict::Improved);
        assert_eq!(v(i(1.05, 1.10), false), Verdict::Regressed);
        assert_eq!(v(i(0.80, 0.90), false), Verdict::Improved);
        assert_eq!(v(i(0.80, 0.90), true), Verdict::Regressed);
        assert_eq!(v(i(1.01, 1.10), true), Verdict::WithinNoise);
        assert_eq!(v(i(0.95, 1.05), true), Verdict::NoChange);
        assert_eq!(Verdict::of(None, true, 0.02), Verdict::TooFewRounds);
        assert!(close(i(0.5, 2.0).half_width(), 1.0, 1e-12));
        let shown = Interval {
            estimate: 4.12,
            low: 3.98,
            high: 4.27,
            rounds: 3,
        };
        assert_eq!(shown.text(2), "4.12x [3.98–4.27]");
    }
}
