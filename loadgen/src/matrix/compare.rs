//! `loadgen compare A B`: two runs' summaries side by side, with B/A ratios and whether
//! each difference is larger than the spread of the rounds (the min–max ranges of the
//! two runs do not overlap); with `--html OUT`, the same as a page
//! ([`crate::matrix::render::html::compare`]) with more figures and every round drawn.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::matrix::manifest;
use crate::matrix::render::html;
use crate::matrix::render::html::compare::Side;
use crate::matrix::summary::{ConfigSummary, Measurement, Spread, Summary};

/// Read `summary.json` from a run directory, or from the file itself.
pub fn load_summary(path: &Path) -> anyhow::Result<Summary> {
    let file: PathBuf = if path.is_dir() {
        path.join("summary.json")
    } else {
        path.to_path_buf()
    };
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not a loadgen summary", file.display()))
}

/// Whether B differs from A by more than the rounds' spread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The two runs' min–max ranges over rounds do not overlap.
    Beyond,
    /// They overlap: the difference is within what the rounds vary by.
    Within,
    /// One round each: no spread to judge by.
    NoSpread,
    /// A run lacks the figure.
    Missing,
}

impl Verdict {
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Beyond => "yes",
            Verdict::Within => "no",
            Verdict::NoSpread => "no spread (1 round each)",
            Verdict::Missing => "–",
        }
    }
}

/// One figure of one configuration in the two runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    pub a: Option<Spread>,
    pub b: Option<Spread>,
    pub verdict: Verdict,
}

impl Change {
    /// A single round is a range of one value; two single rounds have no spread to
    /// judge by.
    pub fn of(a: Option<Spread>, b: Option<Spread>, rounds_a: u32, rounds_b: u32) -> Change {
        let verdict = match (a, b) {
            (Some(_), Some(_)) if rounds_a < 2 && rounds_b < 2 => Verdict::NoSpread,
            (Some(a), Some(b)) if a.separated_from(&b) => Verdict::Beyond,
            (Some(_), Some(_)) => Verdict::Within,
            _ => Verdict::Missing,
        };
        Change { a, b, verdict }
    }

    /// B's median over A's.
    pub fn ratio(&self) -> Option<f64> {
        match (self.a, self.b) {
            (Some(a), Some(b)) if a.median > 0.0 => Some(b.median / a.median),
            _ => None,
        }
    }

    /// The ratio's range from the rounds' extremes: B's min over A's max to B's max
    /// over A's min (it excludes 1 exactly when the verdict is [`Verdict::Beyond`]).
    pub fn ratio_range(&self) -> Option<(f64, f64)> {
        match (self.a, self.b) {
            (Some(a), Some(b)) if a.min > 0.0 && a.max > 0.0 => {
                Some((b.min / a.max, b.max / a.min))
            }
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

fn gateway_us(m: &Measurement) -> Option<f64> {
    m.cpu
        .iter()
        .find(|p| p.name == "gateway")
        .and_then(|p| p.us_per_request)
}

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
        spread: |c| Spread::of(&c.rounds.iter().filter_map(gateway_us).collect::<Vec<_>>()),
        round: gateway_us,
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

fn ratio(change: &Change) -> String {
    change.ratio().map_or("–".into(), |r| format!("{r:.2}x"))
}

fn median(s: Option<Spread>, precision: usize) -> String {
    s.map_or("–".into(), |s| format!("{:.*}", precision, s.median))
}

/// The side-by-side table as Markdown.
pub fn render(a: &Summary, b: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "A: {} run {} ({} round(s))",
        a.experiment, a.run_id, a.rounds
    );
    let _ = writeln!(
        out,
        "B: {} run {} ({} round(s))\n",
        b.experiment, b.run_id, b.rounds
    );
    let _ = writeln!(
        out,
        "| config | req/s A | req/s B | B/A | beyond spread | p99 A (ms) | p99 B (ms) | B/A | beyond spread |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---|---:|---:|---:|---|");
    for (name, ca, cb) in pairs(a, b) {
        let change = |m: &Metric| {
            Change::of(
                ca.and_then(m.spread),
                cb.and_then(m.spread),
                a.rounds,
                b.rounds,
            )
        };
        let (rps, p99) = (change(&METRICS[0]), change(&METRICS[1]));
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} |",
            median(rps.a, 0),
            median(rps.b, 0),
            ratio(&rps),
            rps.verdict.text(),
            median(p99.a, 1),
            median(p99.b, 1),
            ratio(&p99),
            p99.verdict.text(),
        );
    }
    let _ = writeln!(
        out,
        "\n\"beyond spread\": the two runs' min–max ranges over rounds do not overlap. \
         Compare runs from the same machine only."
    );
    out
}

/// `loadgen compare A B --html OUT`: the page of the two runs, written to `out`.
pub fn write_page(a_path: &Path, b_path: &Path, out: &Path) -> anyhow::Result<()> {
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
    let html = html::compare::page(&a, &b);
    std::fs::write(out, html).with_context(|| format!("--html {}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(run: &str, rounds: u32, configs: &[(&str, Spread, Spread)]) -> Summary {
        let configs: Vec<serde_json::Value> = configs
            .iter()
            .map(|(name, rps, p99)| {
                serde_json::json!({
                    "name": name, "description": null, "gateway_args": [], "user_service_args": [],
                    "post_service_args": [], "load": {}, "rounds": [],
                    "median": {"requests_per_sec": rps.median, "p50_ms": 1.0, "p99_ms": p99.median,
                        "upstream_per_request": null, "gateway_cpu_cores": null, "gateway_peak_rss_bytes": null,
                        "cache_hits": null, "cache_misses": null, "cache_dedupes": null, "loadgen_cpu_cores": 0.1},
                    "requests_per_sec": rps, "p99_ms": p99, "ratio": null, "p99_ratio": null,
                    "flamegraph": null, "flamegraph_note": null, "errors_total": 0
                })
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "schema": "loadgen.summary/1", "run_id": run, "experiment": "seed", "baseline": "no-cache",
            "rounds": rounds, "duration_s": 10.0, "warmup_s": 2.0, "quick": false, "warnings": [],
            "configs": configs
        }))
        .unwrap()
    }

    #[test]
    fn side_by_side_with_ratios_and_spread_verdicts() {
        let s = |median: f64, min: f64, max: f64| Spread { median, min, max };
        let a = summary(
            "A",
            3,
            &[
                ("no-cache", s(1000.0, 950.0, 1050.0), s(250.0, 240.0, 260.0)),
                ("ttl-0", s(4600.0, 4500.0, 4700.0), s(46.0, 44.0, 48.0)),
            ],
        );
        let b = summary(
            "B",
            3,
            &[
                ("no-cache", s(1020.0, 990.0, 1100.0), s(240.0, 230.0, 250.0)),
                ("ttl-1", s(4000.0, 3900.0, 4100.0), s(50.0, 49.0, 51.0)),
            ],
        );
        let table = render(&a, &b);
        assert!(
            table.contains("| no-cache | 1000 | 1020 | 1.02x | no | 250.0 | 240.0 | 0.96x | no |"),
            "{table}"
        );
        assert!(table.contains("| ttl-0 | 4600 | – | – | – |"), "{table}");
        assert!(table.contains("| ttl-1 | – | 4000 |"), "{table}");
        let c = summary(
            "C",
            3,
            &[("no-cache", s(2000.0, 1900.0, 2100.0), s(100.0, 95.0, 105.0))],
        );
        let table = render(&a, &c);
        assert!(
            table
                .contains("| no-cache | 1000 | 2000 | 2.00x | yes | 250.0 | 100.0 | 0.40x | yes |"),
            "{table}"
        );
        // One round against three: the single value is judged against the other's range.
        let one = summary(
            "D",
            1,
            &[(
                "no-cache",
                s(1040.0, 1040.0, 1040.0),
                s(300.0, 300.0, 300.0),
            )],
        );
        let table = render(&a, &one);
        assert!(
            table.contains("| 1.04x | no |") && table.contains("| 1.20x | yes |"),
            "{table}"
        );
        let table = render(&one, &one);
        assert!(table.contains("no spread (1 round each)"), "{table}");
    }

    #[test]
    fn a_missing_summary_is_named() {
        let err = load_summary(Path::new("/nonexistent/run"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("/nonexistent/run"), "{err}");
    }
}
