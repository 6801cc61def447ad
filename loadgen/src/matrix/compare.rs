//! `loadgen compare A B`: two runs' summaries side by side, with each B/A ratio's 95%
//! interval and criterion's kind of verdict (improved, regressed, within noise, no
//! change: [`crate::matrix::confidence`]); with `--html OUT`, the same as a page
//! ([`crate::matrix::render::html::compare`]) with more figures and every round drawn.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::matrix::confidence::{self, Interval, Verdict};
use crate::matrix::manifest;
use crate::matrix::render::html;
use crate::matrix::render::html::compare::Side;
use crate::matrix::summary::{ConfigSummary, Measurement, Spread, Summary};

/// Read `summary.json` from a run directory, or from the file itself, with the
/// intervals against the baseline derived from its rounds (runs recorded before
/// intervals existed get them too).
pub fn load_summary(path: &Path) -> anyhow::Result<Summary> {
    let file: PathBuf = if path.is_dir() {
        path.join("summary.json")
    } else {
        path.to_path_buf()
    };
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let mut summary: Summary = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a loadgen summary", file.display()))?;
    summary.derive_intervals();
    Ok(summary)
}

/// One figure of one configuration in the two runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    pub a: Option<Spread>,
    pub b: Option<Spread>,
    /// B over A with its 95% interval ([`confidence::unpaired`]), from two rounds a side.
    pub interval: Option<Interval>,
    /// What the interval and the noise threshold conclude.
    pub judgement: Verdict,
}

impl Change {
    /// One metric of one configuration in runs A and B, judged against `noise` (a
    /// share: 0.02 is ±2%).
    pub fn between(
        metric: &Metric,
        a: Option<&ConfigSummary>,
        b: Option<&ConfigSummary>,
        noise: f64,
    ) -> Change {
        let rounds = |c: Option<&ConfigSummary>| -> Vec<f64> {
            c.map_or(Vec::new(), |c| {
                c.rounds.iter().filter_map(metric.round).collect()
            })
        };
        let (ra, rb) = (rounds(a), rounds(b));
        let interval = confidence::unpaired(&ra, &rb);
        Change {
            a: a.and_then(metric.spread),
            b: b.and_then(metric.spread),
            interval,
            judgement: Verdict::of(interval.as_ref(), metric.higher_is_better, noise),
        }
    }

    /// B's median over A's.
    pub fn ratio(&self) -> Option<f64> {
        match (self.a, self.b) {
            (Some(a), Some(b)) if a.median > 0.0 => Some(b.median / a.median),
            _ => None,
        }
    }
}

/// A figure `loadgen compare` sets side by side.
pub struct Metric {
    pub title: &'static str,
    /// Whether more is better (req/s) or less (latency, CPU).
    pub higher_is_better: bool,
    pub digits: usize,
    /// The figure over rounds.
    pub spread: fn(&ConfigSummary) -> Option<Spread>,
    /// The figure of one round.
    pub round: fn(&Measurement) -> Option<f64>,
}

/// Where [`METRICS`] holds req/s against the run's baseline.
const AGAINST_BASELINE: usize = 3;

/// req/s, p99, the gateway's CPU per request, and req/s against the run's baseline.
pub const METRICS: [Metric; 4] = [
    Metric {
        title: "req/s",
        higher_is_better: true,
        digits: 0,
        spread: |c| c.requests_per_sec,
        round: |m| Some(m.requests_per_sec),
    },
    Metric {
        title: "p99 (ms)",
        higher_is_better: false,
        digits: 1,
        spread: |c| c.p99_ms,
        round: |m| Some(m.p99_ms),
    },
    Metric {
        title: "gateway CPU µs per request",
        higher_is_better: false,
        digits: 1,
        spread: |c| {
            Spread::of(
                &c.rounds
                    .iter()
                    .filter_map(Measurement::gateway_us_per_request)
                    .collect::<Vec<_>>(),
            )
        },
        round: Measurement::gateway_us_per_request,
    },
    Metric {
        title: "req/s against the run's baseline (within rounds)",
        higher_is_better: true,
        digits: 2,
        spread: |c| c.ratio,
        round: |m| m.ratio,
    },
];

/// Every configuration of A, then those only B has, each with its summary in A and B.
pub fn pairs<'a>(
    a: &'a Summary,
    b: &'a Summary,
) -> Vec<(
    &'a str,
    Option<&'a ConfigSummary>,
    Option<&'a ConfigSummary>,
)> {
    let mut names: Vec<&str> = a.configs.iter().map(|c| c.name.as_str()).collect();
    for c in &b.configs {
        if !names.contains(&c.name.as_str()) {
            names.push(&c.name);
        }
    }
    let find = |s: &'a Summary, name: &str| s.configs.iter().find(|c| c.name == name);
    names
        .into_iter()
        .map(|name| (name, find(a, name), find(b, name)))
        .collect()
}

/// The noise threshold `loadgen compare` uses unless `--noise` says otherwise, as a
/// share: a change must exceed it, with 95% confidence, to count as improved or
/// regressed.
pub const DEFAULT_NOISE: f64 = 0.02;

/// The side-by-side table as Markdown: per configuration and figure, A, B, B/A with
/// its 95% interval, and the verdict.
pub fn render(a: &Summary, b: &Summary, noise: f64) -> String {
    let mut out = String::new();
    for (label, s) in [("A", a), ("B", b)] {
        let _ = writeln!(
            out,
            "{label}: {} run {} ({} round(s))",
            s.experiment, s.run_id, s.rounds
        );
    }
    let _ = writeln!(
        out,
        "\n| config | figure | A | B | B/A [95% interval] | verdict |\n|---|---|---:|---:|---:|---|"
    );
    for (name, ca, cb) in pairs(a, b) {
        // The baseline's ratio to itself is 1 in every round: no row.
        let is_baseline = |c: Option<&ConfigSummary>, s: &Summary| {
            c.is_some_and(|c| c.baseline.as_deref().unwrap_or(&s.baseline) == name)
        };
        let own_baseline = is_baseline(ca, a) || is_baseline(cb, b);
        for (i, metric) in METRICS.iter().enumerate() {
            if i == AGAINST_BASELINE && own_baseline {
                continue;
            }
            let change = Change::between(metric, ca, cb, noise);
            if change.a.is_none() && change.b.is_none() {
                continue;
            }
            let median = |s: Option<Spread>| {
                s.map_or("–".into(), |s| format!("{:.*}", metric.digits, s.median))
            };
            let ratio = match (change.interval, change.ratio()) {
                (Some(i), _) => i.text(2),
                (None, Some(r)) => format!("{r:.2}x"),
                (None, None) => "–".into(),
            };
            let verdict = if change.a.is_some() && change.b.is_some() {
                change.judgement.text()
            } else {
                "–"
            };
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {} | {ratio} | {verdict} |",
                metric.title,
                median(change.a),
                median(change.b),
            );
        }
    }
    let _ = writeln!(
        out,
        "\n{}. A and B are medians over rounds. Verdict: improved or regressed when the whole \
         interval lies beyond the noise threshold of ±{:.1}%; within noise when it excludes 1 but \
         not the threshold; no change when it holds 1; too few rounds under 2 a side. \
         Compare runs from the same machine only.",
        confidence::UNPAIRED_METHOD,
        noise * 100.0
    );
    out
}

/// `loadgen compare A B --html OUT`: the page of the two runs, written to `out`.
pub fn write_page(a_path: &Path, b_path: &Path, out: &Path, noise: f64) -> anyhow::Result<()> {
    let from = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let side = |path: &Path, label: &'static str| -> anyhow::Result<Side> {
        let dir = if path.is_dir() {
            path.to_path_buf()
        } else {
            path.parent().map_or(PathBuf::from("."), Path::to_path_buf)
        };
        let page = dir.join("index.html");
        Ok(Side {
            label,
            summary: load_summary(path)?,
            manifest: manifest::load(&dir)?,
            page: page
                .is_file()
                .then(|| html::page::relative_path(&from, &page)),
        })
    };
    let (a, b) = (side(a_path, "A")?, side(b_path, "B")?);
    let html = html::compare::page(&a, &b, noise);
    std::fs::write(out, html).with_context(|| format!("--html {}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::summary::fixtures::run_of as run;

    fn row<'a>(table: &'a str, config: &str, figure: &str) -> &'a str {
        table
            .lines()
            .find(|l| l.starts_with(&format!("| {config} | {figure} |")))
            .unwrap_or_else(|| panic!("no row {config}/{figure} in\n{table}"))
    }

    #[test]
    fn each_figure_gets_an_interval_and_a_verdict() {
        let a = run(
            "A",
            &[
                ("no-cache", &[1000.0, 1010.0, 990.0]),
                ("ttl-0", &[4000.0, 4100.0, 3900.0]),
            ],
        );
        let b = run(
            "B",
            &[
                ("no-cache", &[1005.0, 995.0, 1012.0]),
                ("ttl-0", &[4800.0, 4900.0, 4700.0]),
                ("ttl-1", &[5000.0, 5100.0]),
            ],
        );
        let table = render(&a, &b, DEFAULT_NOISE);
        // The same req/s within a percent: the interval holds 1.
        let same = row(&table, "no-cache", "req/s");
        assert!(same.ends_with("| no change |"), "{same}");
        // 20% more req/s is an improvement; the same change as CPU per request and
        // p99 (less is better) is one too.
        let rps = row(&table, "ttl-0", "req/s");
        assert!(
            rps.contains("| 4000 | 4800 | 1.20x [") && rps.ends_with("| improved |"),
            "{rps}"
        );
        let cpu = row(&table, "ttl-0", "gateway CPU µs per request");
        assert!(
            cpu.contains("0.83x [") && cpu.ends_with("| improved |"),
            "{cpu}"
        );
        assert!(
            row(&table, "ttl-0", "p99 (ms)").ends_with("| improved |"),
            "{table}"
        );
        // Swapped, it is a regression.
        let back = render(&b, &a, DEFAULT_NOISE);
        assert!(
            row(&back, "ttl-0", "req/s").ends_with("| regressed |"),
            "{back}"
        );
        // A configuration only one run has gets no verdict.
        assert!(
            row(&table, "ttl-1", "req/s").contains("| – | 5050 | – | – |"),
            "{table}"
        );
        assert!(
            table.contains("Welch's t") && table.contains("±2.0%"),
            "{table}"
        );
        assert!(!table.contains("| no-cache | req/s against"), "{table}");
    }

    #[test]
    fn a_small_certain_change_is_within_noise_and_one_round_is_too_few() {
        let a = run("A", &[("no-cache", &[1000.0, 1001.0, 999.0, 1000.5])]);
        let b = run("B", &[("no-cache", &[1010.0, 1011.0, 1009.0, 1010.5])]);
        let table = render(&a, &b, DEFAULT_NOISE);
        assert!(
            row(&table, "no-cache", "req/s").ends_with("| within noise |"),
            "{table}"
        );
        // With a threshold under the 1% change, it counts.
        let fine = render(&a, &b, 0.005);
        assert!(
            row(&fine, "no-cache", "req/s").ends_with("| improved |"),
            "{fine}"
        );
        let one = run("C", &[("no-cache", &[1500.0])]);
        let table = render(&one, &one, DEFAULT_NOISE);
        let r = row(&table, "no-cache", "req/s");
        assert!(
            r.contains("1.00x") && r.ends_with("| too few rounds |"),
            "{r}"
        );
    }

    #[test]
    fn a_missing_summary_is_named() {
        let err = load_summary(Path::new("/nonexistent/run"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("/nonexistent/run"), "{err}");
    }
}
