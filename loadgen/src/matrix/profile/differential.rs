//! A configuration's flamegraph against its baseline's: where its CPU per request went
//! up (red) or down (blue), drawn with inferno's differential flamegraph.
//!
//! The two profiles cover different numbers of requests (a faster configuration
//! answers more in the same window), so the baseline's counts are first scaled to the
//! configuration's request count: the colours then show CPU per request, the figure
//! the lab compares, rather than CPU per window. The widths are the configuration's
//! own profile.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;

use crate::matrix::summary::ConfigSummary;

/// `before` scaled from `before_requests` to `after_requests` requests.
pub fn per_request(
    before: &BTreeMap<String, u64>,
    before_requests: f64,
    after_requests: f64,
) -> BTreeMap<String, u64> {
    let scale = if before_requests > 0.0 {
        after_requests / before_requests
    } else {
        1.0
    };
    before
        .iter()
        .map(|(stack, n)| (stack.clone(), (*n as f64 * scale).round() as u64))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// Write the differential flamegraph of `after` against `before` (already scaled).
pub fn render_svg(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
    title: &str,
    subtitle: &str,
    out: &Path,
) -> anyhow::Result<()> {
    let text = super::flamegraph::to_collapsed;
    let mut diff = Vec::new();
    inferno::differential::from_readers(
        inferno::differential::Options::default(),
        text(before).as_bytes(),
        text(after).as_bytes(),
        &mut diff,
    )
    .context("differencing the profiles")?;
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_string();
    options.subtitle = Some(subtitle.to_string());
    options.count_name = "samples".to_string();
    let file = std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    inferno::flamegraph::from_reader(&mut options, &diff[..], std::io::BufWriter::new(file))
        .with_context(|| format!("rendering {}", out.display()))?;
    Ok(())
}

/// Each configuration's flamegraph against its baseline's, per request
/// (`flame-diff-NAME.svg`), where both were profiled.
pub fn write_all(
    out: &Path,
    configs: &mut [ConfigSummary],
    stacks: &BTreeMap<String, BTreeMap<String, u64>>,
    baseline_of: &dyn Fn(&str) -> String,
    run_id: &str,
) -> anyhow::Result<()> {
    let requests = |name: &str| -> f64 {
        configs
            .iter()
            .find(|c| c.name == name)
            .map_or(0.0, |c| c.rounds.iter().map(|m| m.requests as f64).sum())
    };
    let mut files = Vec::new();
    for c in configs.iter() {
        let base = baseline_of(&c.name);
        let (Some(after), Some(before)) = (stacks.get(&c.name), stacks.get(&base)) else {
            continue;
        };
        if base == c.name || after.is_empty() || before.is_empty() {
            continue;
        }
        let file = format!("flame-diff-{}.svg", c.name);
        render_svg(
            &per_request(before, requests(&base), requests(&c.name)),
            after,
            &format!("gateway — {} against {base}, per request", c.name),
            &format!("red: more CPU per request than {base}, blue: less; run {run_id}"),
            &out.join(&file),
        )?;
        files.push((c.name.clone(), file));
    }
    for (name, file) in files {
        if let Some(c) = configs.iter_mut().find(|c| c.name == name) {
            c.flamegraph_diff = Some(file);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::profile::flamegraph::collapsed_counts;

    #[test]
    fn the_baseline_is_scaled_to_the_same_requests() {
        let before = collapsed_counts("main;parse 100\nmain;execute 300\nmain;rare 1\n");
        // The baseline answered 1000 requests, the configuration 4000.
        let scaled = per_request(&before, 1000.0, 4000.0);
        assert_eq!(scaled["main;parse"], 400);
        assert_eq!(scaled["main;execute"], 1200);
        assert_eq!(scaled["main;rare"], 4);
        assert_eq!(per_request(&before, 0.0, 10.0), before);
    }

    #[test]
    fn renders_growth_and_shrinkage() {
        let dir = std::env::temp_dir().join(format!("loadgen-diff-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("diff.svg");
        let before = collapsed_counts("main;parse 100\nmain;execute 300\n");
        let after = collapsed_counts("main;parse 300\nmain;execute 100\n");
        render_svg(&before, &after, "ttl-0 against no-cache", "test", &out).unwrap();
        let svg = std::fs::read_to_string(&out).unwrap();
        assert!(svg.contains("<svg") && svg.contains("parse") && svg.contains("execute"));
        // Each frame's tooltip says how its share of the samples changed.
        assert!(
            svg.contains("parse (300 samples, 75.00%; +50.00%)"),
            "{svg}"
        );
        assert!(
            svg.contains("execute (100 samples, 25.00%; -50.00%)"),
            "{svg}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
