//! `loadgen calibrate RUN`: how often the intervals cry wolf on this machine, and how
//! small a difference they can see, read from an A/A run (`experiments/a-a.toml`: one
//! configuration repeated, so every true ratio is 1).
//!
//! For each number of rounds k from 2 to the run's, every window of k consecutive
//! rounds and every pair of the repeated configurations is one comparison of nothing
//! against itself, made two ways:
//! - *paired*, as a run's page compares a configuration with its baseline
//!   ([`confidence::paired`] on the per-round ratios);
//! - *unpaired*, as `loadgen compare` compares two runs ([`confidence::unpaired`]).
//!
//! A comparison whose interval misses 1 is a false alarm of the interval; one whose
//! verdict is improved or regressed at the noise threshold is a false alarm of the
//! verdict, which is what a reader acts on. The comparisons overlap (windows share
//! rounds, pairs share configurations), so the rates are estimates from one run's
//! noise, not independent trials: the table gives the count they come from.
//!
//! The intervals' half-width is the smallest difference those rounds tell from noise:
//! a true difference of one half-width is detected about half the time, of two
//! half-widths nearly always.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::bail;

use super::compare::{load_summary, Metric, METRICS};
use super::confidence::{self, Interval, Verdict};
use super::summary::Summary;

/// The figures calibrated: req/s and the gateway's CPU per request.
const FIGURES: [usize; 2] = [0, 2];

/// One number of rounds, one figure, one way of comparing.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub rounds: usize,
    pub figure: &'static str,
    pub paired: bool,
    pub comparisons: usize,
    /// Intervals that miss 1.
    pub missed_one: usize,
    /// Verdicts of improved or regressed at the noise threshold.
    pub false_verdicts: usize,
    /// The median and 90th percentile of the intervals' half-widths (0.05: ±5%).
    pub half_width_median: f64,
    pub half_width_p90: f64,
}

impl Row {
    fn rate(&self, n: usize) -> f64 {
        n as f64 / self.comparisons.max(1) as f64
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

/// Every comparison of `k` rounds of one figure, paired or not.
fn row(summary: &Summary, metric: &Metric, k: usize, paired: bool, noise: f64) -> Option<Row> {
    let series: Vec<Vec<Option<f64>>> = summary
        .configs
        .iter()
        .map(|c| {
            let mut rounds: Vec<_> = c.rounds.iter().collect();
            rounds.sort_by_key(|m| m.round);
            rounds.iter().map(|m| (metric.round)(m)).collect()
        })
        .collect();
    let n = series.iter().map(Vec::len).min()?;
    let mut intervals: Vec<Interval> = Vec::new();
    for i in 0..series.len() {
        for j in i + 1..series.len() {
            for start in 0..=n.saturating_sub(k) {
                let window = start..start + k;
                let a: Vec<f64> = series[i][window.clone()]
                    .iter()
                    .flatten()
                    .copied()
                    .collect();
                let b: Vec<f64> = series[j][window.clone()]
                    .iter()
                    .flatten()
                    .copied()
                    .collect();
                let interval = if paired {
                    let ratios: Vec<f64> = window
                        .filter_map(|r| Some(series[j][r]? / series[i][r]?))
                        .collect();
                    confidence::paired(&ratios)
                } else {
                    confidence::unpaired(&a, &b)
                };
                intervals.extend(interval);
            }
        }
    }
    if intervals.is_empty() {
        return None;
    }
    let mut widths: Vec<f64> = intervals.iter().map(Interval::half_width).collect();
    widths.sort_by(f64::total_cmp);
    Some(Row {
        rounds: k,
        figure: metric.title,
        paired,
        comparisons: intervals.len(),
        missed_one: intervals.iter().filter(|i| i.excludes_one()).count(),
        false_verdicts: intervals
            .iter()
            .filter(|i| {
                matches!(
                    Verdict::of(Some(i), metric.higher_is_better, noise),
                    Verdict::Improved | Verdict::Regressed
                )
            })
            .count(),
        half_width_median: percentile(&widths, 0.5),
        half_width_p90: percentile(&widths, 0.9),
    })
}

/// Every row of an A/A run: k = 2 … rounds, req/s and CPU per request, paired and not.
pub fn rows(summary: &Summary, noise: f64) -> Vec<Row> {
    let rounds = summary
        .configs
        .iter()
        .map(|c| c.rounds.len())
        .min()
        .unwrap_or(0);
    let mut out = Vec::new();
    for paired in [true, false] {
        for &f in &FIGURES {
            for k in 2..=rounds {
                out.extend(row(summary, &METRICS[f], k, paired, noise));
            }
        }
    }
    out
}

/// The calibration of an A/A run as Markdown.
pub fn render(summary: &Summary, noise: f64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Calibration from the A/A run {} ({} configurations of one setting, {} rounds)\n",
        summary.run_id,
        summary.configs.len(),
        summary.rounds
    );
    let _ = writeln!(
        out,
        "Every comparison below sets a configuration against an identical one, so its true \
         ratio is 1. missed 1: 95% intervals that exclude 1 (the goal: about 5%). false \
         verdicts: comparisons `loadgen compare` would call improved or regressed at a noise \
         threshold of ±{:.1}% (the goal: at most 5%). half-width: how far the interval reaches \
         either side (median and 90th percentile), the smallest difference those rounds tell \
         from noise about half the time.\n",
        noise * 100.0
    );
    let _ = writeln!(
        out,
        "| comparison | figure | rounds | comparisons | missed 1 | false verdicts | half-width median | half-width p90 |\n|---|---|---:|---:|---:|---:|---:|---:|"
    );
    let pct = |x: f64| format!("{:.1}%", x * 100.0);
    for r in rows(summary, noise) {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} ({}) | {} ({}) | ±{} | ±{} |",
            if r.paired {
                "paired, within a run"
            } else {
                "unpaired, two runs"
            },
            r.figure,
            r.rounds,
            r.comparisons,
            r.missed_one,
            pct(r.rate(r.missed_one)),
            r.false_verdicts,
            pct(r.rate(r.false_verdicts)),
            pct(r.half_width_median),
            pct(r.half_width_p90),
        );
    }
    let _ = writeln!(
        out,
        "\nWindows of consecutive rounds and pairs of configurations overlap, so these are \
         estimates from one run's noise, not independent trials. Paired: {}. Unpaired: {}.",
        confidence::PAIRED_METHOD,
        confidence::UNPAIRED_METHOD
    );
    out
}

/// `loadgen calibrate RUN`: print the calibration and write it to `RUN/calibration.md`.
pub fn run(dir: &Path, noise: f64) -> anyhow::Result<()> {
    let summary = load_summary(dir)?;
    if summary.configs.len() < 2 || summary.rounds < 2 {
        bail!(
            "{}: an A/A run needs two configurations or more and two rounds or more \
             (it has {} and {}); run experiments/a-a.toml",
            dir.display(),
            summary.configs.len(),
            summary.rounds
        );
    }
    let text = render(&summary, noise);
    print!("{text}");
    if dir.is_dir() {
        std::fs::write(dir.join("calibration.md"), &text)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::summary::fixtures::{measurement, summary};
    use crate::matrix::summary::ConfigSummary;

    /// An A/A run: `configs` identical configurations whose req/s in round r is
    /// `base(r) × wobble(config, r)`.
    fn a_a(configs: usize, rounds: usize, wobble: impl Fn(usize, usize) -> f64) -> Summary {
        let mut s = summary("a-a", "a1", Vec::new());
        s.rounds = rounds as u32;
        for c in 0..configs {
            let name = format!("a{}", c + 1);
            let ms = (0..rounds)
                .map(|r| {
                    let rps = 1000.0 * (1.0 + 0.2 * r as f64) * wobble(c, r);
                    measurement(r as u32 + 1, &name, rps, 10.0)
                })
                .collect();
            s.configs.push(ConfigSummary::from_rounds(
                &name,
                None,
                Default::default(),
                serde_json::json!({}),
                ms,
            ));
        }
        s
    }

    #[test]
    fn pairing_cancels_drift_that_the_unpaired_intervals_carry() {
        // Every configuration drifts the same way from round to round, and differs from
        // the others by at most ±1% in any round.
        let s = a_a(4, 5, |c, r| {
            1.0 + 0.01 * (((c * 7 + r * 3) % 5) as f64 - 2.0) / 2.0
        });
        let rows = rows(&s, 0.02);
        // k = 2…5, two figures (the fixture has no CPU: req/s only), paired and not.
        let find = |paired: bool, k: usize| {
            rows.iter()
                .find(|r| r.paired == paired && r.rounds == k && r.figure == "req/s")
                .unwrap()
        };
        let (p, u) = (find(true, 3), find(false, 3));
        // 6 pairs × 3 windows.
        assert_eq!((p.comparisons, u.comparisons), (18, 18));
        assert!(p.half_width_median < 0.05, "{p:?}");
        assert!(
            u.half_width_median > 0.3,
            "drift widens unpaired intervals: {u:?}"
        );
        assert_eq!(p.false_verdicts, 0, "{p:?}");
        assert_eq!(u.missed_one, 0, "{u:?}");
        assert!(rows.iter().all(|r| r.figure == "req/s"), "{rows:?}");
    }

    #[test]
    fn a_systematic_difference_is_counted_as_a_false_alarm() {
        // a2 is 10% faster in every round: in an A/A run that is exactly what the
        // calibration must expose.
        let s = a_a(
            2,
            4,
            |c, r| if c == 1 { 1.1 } else { 1.0 + 0.001 * r as f64 },
        );
        let r = rows(&s, 0.02)
            .into_iter()
            .find(|r| r.paired && r.rounds == 4)
            .unwrap();
        assert_eq!((r.comparisons, r.missed_one, r.false_verdicts), (1, 1, 1));
        let text = render(&s, 0.02);
        assert!(
            text.contains("| paired, within a run | req/s | 4 | 1 | 1 (100.0%) | 1 (100.0%) |"),
            "{text}"
        );
    }

    #[test]
    fn a_run_that_is_not_an_a_a_run_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("loadgen-calibrate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let s = a_a(1, 3, |_, _| 1.0);
        std::fs::write(dir.join("summary.json"), serde_json::to_string(&s).unwrap()).unwrap();
        let err = run(&dir, 0.02).unwrap_err().to_string();
        assert!(
            err.contains("two configurations or more") && err.contains("a-a.toml"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
