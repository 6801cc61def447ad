//! `summary.md`'s cache tables: what the caches held at the window's end (entries, the
//! bytes they hold, against the gateway's RSS), how often an entry one operation
//! stored answered another, and where (per namespace). Only for runs whose gateways
//! report these figures.

use std::fmt::Write as _;

use crate::matrix::summary::Summary;

/// Most namespaces listed per configuration in the reuse table.
const TOP_NAMESPACES: usize = 8;

fn count(v: Option<f64>) -> String {
    v.map_or("–".into(), |x| format!("{x:.0}"))
}

fn mib(bytes: Option<f64>) -> String {
    bytes.map_or("–".into(), |b| {
        format!("{:.2} MiB", b / (1024.0 * 1024.0))
    })
}

fn share(part: Option<f64>, whole: Option<f64>) -> String {
    match (part, whole) {
        (Some(p), Some(w)) if w > 0.0 => format!("{:.1}%", 100.0 * p / w),
        _ => "–".into(),
    }
}

/// The tables, or `None` when no configuration has the figures.
pub fn table(summary: &Summary) -> Option<String> {
    let rows: Vec<_> = summary
        .configs
        .iter()
        .filter_map(|c| c.median.cache.as_ref().map(|f| (c, f)))
        .collect();
    if rows.is_empty() {
        return None;
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n**Cache memory and reuse across operations** (medians over rounds; entries and bytes at the window's end, summed over gateways)\n"
    );
    let _ = writeln!(
        out,
        "| config | entries | bytes held | bytes/entry | gateway RSS end | held / RSS | hits | hits on another operation's entry | calls joining another operation's fetch |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (c, f) in &rows {
        let m = &c.median;
        let per_entry = match (f.bytes, f.entries) {
            (Some(b), Some(e)) if e > 0.0 => format!("{:.0}", b / e),
            _ => "–".into(),
        };
        let rss = m.rss_end_mib.map(|x| x * 1024.0 * 1024.0);
        let cross = match f.cross_operation_hits {
            Some(x) => format!("{x:.0} ({})", share(Some(x), m.cache_hits)),
            None => "–".into(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {per_entry} | {} | {} | {} | {cross} | {} |",
            c.name,
            count(f.entries),
            mib(f.bytes),
            mib(rss),
            share(f.bytes, rss),
            count(m.cache_hits),
            count(f.cross_operation_in_flight),
        );
    }
    let _ = writeln!(
        out,
        "\nbytes held: each entry's piece of answer (the tape it keeps alive) and its bookkeeping, as the \
         gateway weighs them (`gateway_cache_bytes`); RSS end is the largest gateway's VmRSS at the window's end \
         (with profiling on it includes the profiler). hits on another operation's entry: hits whose entry was \
         stored by another operation (document and operation name), `gateway_cache_cross_operation_total{{how=\"hit\"}}`, \
         with their share of all hits; calls joining another operation's fetch: `how=\"in_flight\"`."
    );
    let mut reuse = String::new();
    for (c, f) in &rows {
        let mut spaces: Vec<_> = f
            .by_namespace
            .iter()
            .filter(|(_, n)| n.cross_operation_hits.unwrap_or(0.0) > 0.0)
            .collect();
        spaces.sort_by(|a, b| {
            b.1.cross_operation_hits
                .unwrap_or(0.0)
                .total_cmp(&a.1.cross_operation_hits.unwrap_or(0.0))
        });
        for (ns, n) in spaces.into_iter().take(TOP_NAMESPACES) {
            let _ = writeln!(
                reuse,
                "| {} | `{ns}` | {} | {} | {} | {} ({}) |",
                c.name,
                count(n.entries),
                mib(n.bytes),
                count(n.hits),
                count(n.cross_operation_hits),
                share(n.cross_operation_hits, n.hits),
            );
        }
    }
    if !reuse.is_empty() {
        let _ = writeln!(
            out,
            "\n**Where the reuse was** (per namespace, the {TOP_NAMESPACES} with the most hits on another operation's entry)\n"
        );
        let _ = writeln!(
            out,
            "| config | namespace | entries | bytes held | hits | on another operation's entry |\n|---|---|---:|---:|---:|---:|"
        );
        out.push_str(&reuse);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::cache_figures::{CacheFigures, NamespaceFigures};
    use crate::matrix::summary::fixtures::{measurement, summary};

    #[test]
    fn the_tables_show_what_was_held_and_shared() {
        let plain = measurement(1, "no-cache", 1000.0, 10.0);
        assert!(table(&summary("x", "no-cache", vec![plain.clone()])).is_none());
        let mut cached = measurement(1, "ttl-10", 2000.0, 5.0);
        cached.cache_hits = Some(1000.0);
        cached.rss_end_mib = Some(32.0);
        cached.cache = Some(CacheFigures {
            entries: Some(2048.0),
            bytes: Some(4.0 * 1024.0 * 1024.0),
            cross_operation_hits: Some(250.0),
            cross_operation_in_flight: Some(3.0),
            by_namespace: [(
                "Product.name+price".to_string(),
                NamespaceFigures {
                    entries: Some(1000.0),
                    bytes: Some(1024.0 * 1024.0),
                    hits: Some(500.0),
                    cross_operation_hits: Some(250.0),
                    cross_operation_in_flight: Some(3.0),
                },
            )]
            .into(),
        });
        let text = table(&summary("x", "no-cache", vec![plain, cached])).unwrap();
        assert!(
            text.contains(
                "| ttl-10 | 2048 | 4.00 MiB | 2048 | 32.00 MiB | 12.5% | 1000 | 250 (25.0%) | 3 |"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "| ttl-10 | `Product.name+price` | 1000 | 1.00 MiB | 500 | 250 (50.0%) |"
            ),
            "{text}"
        );
        assert!(!text.contains("| no-cache |"));
    }
}
