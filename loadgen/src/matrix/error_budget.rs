//! Never a silent measurement of errors: the share of a round's answers that carried
//! errors (GraphQL errors in 2xx answers, non-2xx, transport errors, timeouts), and the
//! limit past which the run stops (`max_error_rate` in the file, per configuration, or
//! `--max-error-rate`; by default 1% for configurations whose answers are checked, no
//! limit for `check = false` ones, whose faults are the experiment).
//!
//! A run below its limit still says so: the summary's errors column gives the count,
//! its share and the classes, and the run's page warns ([`super::disturbance`]).

use super::summary::{ConfigSummary, Measurement};
use crate::bench::recorder::ErrorCounts;

/// Requests made in the window: those answered, and those that got no answer.
pub fn requests_made(requests: u64, errors: &ErrorCounts) -> u64 {
    requests + errors.transport + errors.timeouts
}

/// The share of requests made that got no usable answer.
pub fn error_rate(m: &Measurement) -> f64 {
    let made = requests_made(m.requests, &m.errors);
    if made == 0 {
        0.0
    } else {
        m.errors.total() as f64 / made as f64
    }
}

/// The classes of errors with counts: `GraphQL 1204, timeouts 3`.
pub fn classes(errors: &ErrorCounts) -> String {
    let mut parts = Vec::new();
    for (n, what) in [
        (errors.graphql, "GraphQL"),
        (errors.non_2xx - errors.shed, "non-2xx"),
        (errors.shed, "shed (503)"),
        (errors.transport, "transport"),
        (errors.timeouts, "timeouts"),
    ] {
        if n > 0 {
            parts.push(format!("{what} {n}"));
        }
    }
    parts.join(", ")
}

/// A share as a percentage with the precision it needs.
pub fn percent(x: f64) -> String {
    let p = x * 100.0;
    if p == 0.0 {
        "0%".into()
    } else if p < 0.1 {
        format!("{p:.3}%")
    } else {
        format!("{p:.1}%")
    }
}

/// A configuration's errors over its rounds: the count, their share of the requests
/// made, and the classes (`None` without errors): what the summary's errors column
/// and the run's page show.
pub fn over_rounds(c: &ConfigSummary) -> Option<(u64, f64, String)> {
    let mut sum = ErrorCounts::default();
    let mut made = 0;
    for m in &c.rounds {
        sum.transport += m.errors.transport;
        sum.timeouts += m.errors.timeouts;
        sum.non_2xx += m.errors.non_2xx;
        sum.shed += m.errors.shed;
        sum.graphql += m.errors.graphql;
        made += requests_made(m.requests, &m.errors);
    }
    let total = sum.total();
    (total > 0).then(|| (total, total as f64 / made.max(1) as f64, classes(&sum)))
}

/// `Err(why)` when round `m`'s errors passed `limit`.
pub fn check(m: &Measurement, limit: Option<f64>) -> Result<(), String> {
    let Some(limit) = limit else {
        return Ok(());
    };
    let rate = error_rate(m);
    if rate <= limit || m.errors.total() == 0 {
        return Ok(());
    }
    let made = requests_made(m.requests, &m.errors);
    let mut places: Vec<(&String, &u64)> = m.error_paths.iter().collect();
    places.sort_by(|a, b| b.1.cmp(a.1));
    let example = match places.first() {
        Some((place, n)) => format!(
            "; e.g. at `{place}` ({n} answers): {:?}",
            m.error_examples.get(*place).map_or("", String::as_str)
        ),
        None => String::new(),
    };
    Err(format!(
        "round {}, {}: {} of the answers carried errors ({} of {made}: {}), past the limit of {}{example}. \
         The figures would measure errors: fix what fails, or raise the limit (--max-error-rate, or \
         max_error_rate in the experiment file) when errors are what the experiment measures",
        m.round,
        m.config,
        percent(rate),
        m.errors.total(),
        classes(&m.errors),
        percent(limit),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::summary::fixtures::measurement;

    #[test]
    fn a_round_past_its_limit_is_refused_with_its_errors() {
        let mut m = measurement(2, "ttl-0", 1000.0, 10.0);
        m.requests = 10_000;
        assert!(check(&m, Some(0.01)).is_ok());
        m.errors.graphql = 150;
        m.errors.timeouts = 10;
        m.error_paths.insert("product.shippingEstimate".into(), 150);
        m.error_examples.insert(
            "product.shippingEstimate".into(),
            "inventory is unavailable".into(),
        );
        assert!((error_rate(&m) - 160.0 / 10_010.0).abs() < 1e-9);
        assert!(check(&m, Some(0.05)).is_ok());
        assert!(check(&m, None).is_ok());
        let e = check(&m, Some(0.01)).unwrap_err();
        assert!(e.starts_with("round 2, ttl-0: 1.6% of the answers carried errors (160 of 10010: GraphQL 150, timeouts 10), past the limit of 1.0%"), "{e}");
        assert!(
            e.contains("at `product.shippingEstimate` (150 answers): \"inventory is unavailable\""),
            "{e}"
        );
        assert!(e.contains("--max-error-rate"), "{e}");
        m.errors.graphql = 0;
        m.errors.timeouts = 0;
        assert!(check(&m, Some(0.0)).is_ok(), "no errors never stops a run");
    }
}
