//! The report's table of the edge cache, when some configuration has one
//! (`edge = "varnish"`): what share of the requests Varnish answered itself, what it
//! passed to the gateway, how many purges it took, and the CPU per client request of
//! Varnish and of the gateway behind it, beside p99 and, with a workload, stale reads.
//! Medians over rounds; the configurations without an edge are listed too, for
//! comparison.

use std::fmt::Write;

use crate::matrix::edge_cache::{EdgeFigures, EDGE_NAME};
use crate::matrix::settings::GATEWAY;
use crate::matrix::summary::{ConfigSummary, Summary};

/// The median of `figure` over the rounds that have it.
fn median(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let spread = crate::matrix::summary::Spread::of(&values.flatten().collect::<Vec<_>>());
    spread.map(|s| s.median)
}

fn edge_median(c: &ConfigSummary, figure: impl Fn(&EdgeFigures) -> Option<f64>) -> Option<f64> {
    median(c.rounds.iter().map(|m| m.edge.as_ref().and_then(&figure)))
}

fn cpu_median(c: &ConfigSummary, process: &str) -> Option<f64> {
    median(c.rounds.iter().map(|m| {
        m.cpu
            .iter()
            .find(|p| p.name == process)
            .and_then(|p| p.us_per_request)
    }))
}

fn shown(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "–".to_string(), |v| format!("{v:.digits$}"))
}

/// The table, when some configuration has an edge.
pub fn table(summary: &Summary) -> Option<String> {
    if !summary
        .configs
        .iter()
        .any(|c| c.rounds.iter().any(|m| m.edge.is_some()))
    {
        return None;
    }
    let mut out = String::from(
        "\n**The edge cache.** Varnish with the lab's VCL (`local-varnish/lab.vcl`) in front \
         of the gateway: it keeps an answer as long as its `Cache-Control` allows, passes POST, \
         credentials and `private` answers, and purges by surrogate key. Hit ratio is \
         Varnish's hits over its client requests, and sent to the gateway its backend \
         requests over them (`varnishstat`, over the window); CPU per \
         request is each process's CPU over the window over the client requests answered. \
         Medians over rounds.\n\n\
         | config | edge hit ratio | passed to the gateway | purges | varnish µs/req | gateway µs/req | p99 ms | stale reads |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for c in &summary.configs {
        let has_edge = c.rounds.iter().any(|m| m.edge.is_some());
        let passed = edge_median(c, |e| {
            (e.requests > 0).then(|| e.fetches as f64 / e.requests as f64)
        });
        let stale = c
            .median
            .stale_fraction
            .map_or_else(|| "–".to_string(), |f| format!("{:.2}%", f * 100.0));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {:.2} | {stale} |",
            c.name,
            if has_edge {
                shown(edge_median(c, |e| e.hit_ratio), 3)
            } else {
                "no edge".to_string()
            },
            shown(passed, 3),
            shown(edge_median(c, |e| Some(e.purges as f64)), 0),
            shown(cpu_median(c, EDGE_NAME), 1),
            shown(cpu_median(c, GATEWAY), 1),
            c.median.p99_ms,
        );
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::sampling::ProcessCpu;
    use crate::matrix::summary::fixtures::{measurement, summary};

    fn cpu(name: &str, us: f64) -> ProcessCpu {
        ProcessCpu {
            name: name.into(),
            cpu_seconds: None,
            cores: None,
            us_per_request: Some(us),
        }
    }

    #[test]
    fn a_run_with_an_edge_shows_its_hits_and_both_processes_cpu() {
        let plain = measurement(1, "gateway-alone", 1000.0, 10.0);
        assert!(
            table(&summary("edge", "gateway-alone", vec![plain.clone()])).is_none(),
            "no edge, no table"
        );
        let mut edge = measurement(1, "edge-alone", 4000.0, 2.0);
        edge.edge = Some(EdgeFigures {
            requests: 1000,
            hits: 900,
            misses: 50,
            passes: 50,
            purges: 3,
            fetches: 100,
            hit_ratio: Some(0.9),
        });
        edge.cpu = vec![cpu("varnish", 12.5), cpu("gateway", 2.0)];
        let text = table(&summary("edge", "gateway-alone", vec![plain, edge])).unwrap();
        assert!(
            text.contains("| edge-alone | 0.900 | 0.100 | 3 | 12.5 | 2.0 | 2.00 | – |"),
            "{text}"
        );
        assert!(text.contains("| gateway-alone | no edge |"), "{text}");
    }
}
