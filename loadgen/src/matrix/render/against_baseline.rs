//! The "Against the baseline" table of `summary.md`: per configuration, its req/s,
//! p99 and gateway CPU per request over its baseline's, each with its 95% interval
//! from the rounds paired within the run ([`crate::matrix::confidence`]).
//!
//! This is the table to quote a ratio from: the interval says how far the next run
//! on the same machine may land, which the median and min–max of three rounds do not.

use std::fmt::Write as _;

use crate::matrix::confidence::{Interval, PAIRED_METHOD};
use crate::matrix::summary::Summary;

fn cell(i: Option<&Interval>) -> String {
    i.map_or("–".into(), |i| i.text(2))
}

/// The table, or `None` when no configuration has two rounds paired with its baseline.
pub fn table(summary: &Summary) -> Option<String> {
    let rows: Vec<_> = summary
        .configs
        .iter()
        .filter_map(|c| c.against_baseline.as_ref().map(|a| (c, a)))
        .collect();
    if rows.is_empty() {
        return None;
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n**Against the baseline** (ratios with their 95% intervals, rounds paired)\n"
    );
    let _ = writeln!(
        out,
        "| config | against | req/s | p99 | gateway CPU per request | rounds |\n|---|---|---:|---:|---:|---:|"
    );
    for (c, a) in rows {
        let rounds = [&a.requests_per_sec, &a.p99, &a.gateway_cpu_per_request]
            .into_iter()
            .flatten()
            .map(|i| i.rounds)
            .max()
            .unwrap_or(0);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {rounds} |",
            c.name,
            a.baseline,
            cell(a.requests_per_sec.as_ref()),
            cell(a.p99.as_ref()),
            cell(a.gateway_cpu_per_request.as_ref()),
        );
    }
    let _ = writeln!(
        out,
        "\n{PAIRED_METHOD}. An interval that holds 1 shows no difference the rounds can tell \
         apart from noise; how often one misses the truth on this machine is measured by the \
         A/A experiment (`experiments/a-a.toml`, `loadgen calibrate`)."
    );
    Some(out)
}

#[cfg(test)]
mod tests {
    use crate::matrix::summary::fixtures::run_of;

    #[test]
    fn every_configuration_but_the_baseline_gets_its_intervals() {
        let mut s = run_of(
            "r",
            &[
                ("no-cache", &[1000.0, 1100.0, 900.0]),
                ("ttl-0", &[4000.0, 4500.0, 3500.0]),
            ],
        );
        let table = super::table(&s).unwrap();
        let row = table.lines().find(|l| l.starts_with("| ttl-0 |")).unwrap();
        // Ratios 4.0, 4.09 and 3.89: geometric mean 3.99, ±4.303 standard errors of the
        // log ratios (t with 2 degrees of freedom); p99 and CPU per request the inverse.
        assert!(
            row.starts_with("| ttl-0 | no-cache | 3.99x [3.75–4.25] | 0.25x [0.24–0.27] | 0.25x [0.24–0.27] | 3 |"),
            "{row}"
        );
        assert!(!table.contains("| no-cache | no-cache"), "{table}");
        // The summary.md carries the table and the main table's ratio its interval.
        let md = s.to_markdown("machine");
        assert!(
            md.contains("**Against the baseline**") && md.contains("| 3.99x [3.75–4.25] |"),
            "{md}"
        );
        for c in &mut s.configs {
            c.against_baseline = None;
        }
        assert!(super::table(&s).is_none(), "no intervals, no table");
    }
}
