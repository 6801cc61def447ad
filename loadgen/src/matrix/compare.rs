//! `loadgen compare A B`: two runs' summaries side by side, with B/A ratios and whether
//! each difference is larger than the spread of the rounds (the min–max ranges of the
//! two runs do not overlap).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::matrix::summary::{ConfigSummary, Spread, Summary};

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

/// Whether B differs from A by more than the rounds' spread. A single round is a range
/// of one value; two single rounds have no spread to judge by.
fn verdict(a: Option<Spread>, b: Option<Spread>, rounds_a: u32, rounds_b: u32) -> &'static str {
    match (a, b) {
        (Some(_), Some(_)) if rounds_a < 2 && rounds_b < 2 => "no spread (1 round each)",
        (Some(a), Some(b)) if a.separated_from(&b) => "yes",
        (Some(_), Some(_)) => "no",
        _ => "–",
    }
}

fn ratio(a: Option<Spread>, b: Option<Spread>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a.median > 0.0 => format!("{:.2}x", b.median / a.median),
        _ => "–".into(),
    }
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
    let mut names: Vec<&str> = a.configs.iter().map(|c| c.name.as_str()).collect();
    for c in &b.configs {
        if !names.contains(&c.name.as_str()) {
            names.push(&c.name);
        }
    }
    let find = |s: &'_ Summary, name: &str| -> Option<ConfigSummary> {
        s.configs.iter().find(|c| c.name == name).cloned()
    };
    for name in names {
        let (ca, cb) = (find(a, name), find(b, name));
        let (ra, rb) = (
            ca.as_ref().and_then(|c| c.requests_per_sec),
            cb.as_ref().and_then(|c| c.requests_per_sec),
        );
        let (pa, pb) = (
            ca.as_ref().and_then(|c| c.p99_ms),
            cb.as_ref().and_then(|c| c.p99_ms),
        );
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} |",
            median(ra, 0),
            median(rb, 0),
            ratio(ra, rb),
            verdict(ra, rb, a.rounds, b.rounds),
            median(pa, 1),
            median(pb, 1),
            ratio(pa, pb),
            verdict(pa, pb, a.rounds, b.rounds),
        );
    }
    let _ = writeln!(
        out,
        "\n\"beyond spread\": the two runs' min–max ranges over rounds do not overlap. \
         Compare runs from the same machine only."
    );
    out
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
