//! Flamegraphs from collapsed stacks (`frame;frame;frame COUNT` lines, whichever
//! profiler took them): parse, merge the rounds of a configuration, render an SVG with
//! inferno.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;

/// Parse collapsed stacks into stack → sample count, summing repeated stacks.
pub fn collapsed_counts(text: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    merge_into(&mut counts, text);
    counts
}

/// The number of samples in collapsed stacks.
pub fn sample_count(text: &str) -> u64 {
    collapsed_counts(text).values().sum()
}

/// Add the stacks of `text` to `counts`. Lines that are not `stack COUNT` are skipped.
pub fn merge_into(counts: &mut BTreeMap<String, u64>, text: &str) {
    for line in text.lines() {
        let line = line.trim();
        let Some((stack, count)) = line.rsplit_once(' ') else {
            continue;
        };
        let (stack, Ok(count)) = (stack.trim(), count.parse::<u64>()) else {
            continue;
        };
        if stack.is_empty() || count == 0 {
            continue;
        }
        *counts.entry(stack.to_string()).or_insert(0) += count;
    }
}

/// Collapsed-stack text of `counts`, one `stack COUNT` line each.
pub fn to_collapsed(counts: &BTreeMap<String, u64>) -> String {
    counts
        .iter()
        .map(|(stack, n)| format!("{stack} {n}\n"))
        .collect()
}

/// Render `counts` as a flamegraph SVG at `out`.
pub fn render_svg(
    counts: &BTreeMap<String, u64>,
    title: &str,
    subtitle: &str,
    out: &Path,
) -> anyhow::Result<()> {
    let lines: Vec<String> = counts
        .iter()
        .map(|(stack, n)| format!("{stack} {n}"))
        .collect();
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_string();
    options.subtitle = Some(subtitle.to_string());
    options.count_name = "samples".to_string();
    let file = std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    inferno::flamegraph::from_lines(
        &mut options,
        lines.iter().map(String::as_str),
        std::io::BufWriter::new(file),
    )
    .with_context(|| format!("rendering {}", out.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_merge_by_stack() {
        let mut counts = collapsed_counts("main;serve;parse 3\nmain;serve;execute 5\n\ngarbage\n");
        merge_into(
            &mut counts,
            "main;serve;parse 2\nmain;idle 1\nmain;zero 0\n",
        );
        assert_eq!(counts.len(), 3);
        assert_eq!(counts["main;serve;parse"], 5);
        assert_eq!(counts["main;serve;execute"], 5);
        assert_eq!(
            to_collapsed(&counts),
            "main;idle 1\nmain;serve;execute 5\nmain;serve;parse 5\n"
        );
    }

    #[test]
    fn renders_an_svg() {
        let dir = std::env::temp_dir().join(format!("loadgen-flame-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("flame-test.svg");
        let counts = collapsed_counts("main;serve;parse_query 3\nmain;serve;execute_plan 5\n");
        render_svg(&counts, "gateway", "test", &out).unwrap();
        let svg = std::fs::read_to_string(&out).unwrap();
        assert!(
            svg.starts_with("<?xml") && svg.contains("<svg"),
            "{}",
            &svg[..100.min(svg.len())]
        );
        assert!(svg.contains("execute_plan"));
        std::fs::remove_dir_all(&dir).ok();
    }
}
