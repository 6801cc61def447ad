//! The "per gateway" table of `summary.md`: under each configuration, one row per
//! gateway instance (`gateway-1` … `gateway-N`) with what that node did on its own —
//! the requests it counted, its own cache hit ratio (its `/metrics`), the Redis
//! commands it sent per request, and the freshness of the reads it answered (loadgen
//! keeps one freshness record per gateway URL).
//!
//! This is the table that shows a fleet: with more nodes each node's in-process L1
//! sees a smaller share of the requests, so its hit ratio drops and Redis takes more
//! reads per request; and a read is stale when it comes from a node whose L1 has not
//! heard another node's invalidation yet.

use std::fmt::Write as _;

use crate::bench::report::ms;
use crate::matrix::summary::Summary;

/// The table, or `None` when no configuration ran several gateways.
pub fn table(summary: &Summary) -> Option<String> {
    if !summary.configs.iter().any(|c| c.median.instances.len() > 1) {
        return None;
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n**Per gateway** (medians over rounds; the largest stale age of any round)\n"
    );
    let _ = writeln!(
        out,
        "| config | gateway | requests | share | hit ratio | L1 hit ratio | redis commands/req | redis-server commands/req (all gateways) | reads checked | stale reads | stale age p99 / max |"
    );
    let _ = writeln!(
        out,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let percent = |v: Option<f64>| v.map_or("–".into(), |x| format!("{:.1}%", x * 100.0));
    let figure =
        |v: Option<f64>, digits: usize| v.map_or("–".into(), |x| format!("{x:.digits$}"));
    for c in summary
        .configs
        .iter()
        .filter(|c| !c.median.instances.is_empty())
    {
        let m = &c.median;
        let all: f64 = m.instances.iter().filter_map(|x| x.requests).sum();
        for (i, g) in m.instances.iter().enumerate() {
            let share = g.requests.filter(|_| all > 0.0).map(|r| r / all);
            let stale = match (g.stale_reads, g.stale_fraction) {
                (Some(n), Some(f)) => format!("{n:.0} ({:.2}%)", f * 100.0),
                _ => "–".into(),
            };
            let age = match (g.stale_age_p99_ms, g.stale_age_max_ms) {
                (Some(p99), Some(max)) => format!("{} / {}", ms(p99), ms(max)),
                _ if g.stale_reads.is_some() => "–".into(),
                _ => "".into(),
            };
            // The server's count cannot be split by client: one figure per configuration.
            let server = if i == 0 {
                figure(m.redis_server_commands_per_request, 2)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {server} | {} | {stale} | {age} |",
                if i == 0 { c.name.as_str() } else { "" },
                g.name,
                figure(g.requests, 0),
                percent(share),
                percent(g.cache_hit_ratio),
                percent(g.l1_hit_ratio),
                figure(g.redis_commands_per_request, 2),
                figure(g.reads_checked, 0),
            );
        }
    }
    let _ = writeln!(
        out,
        "\nPer gateway: requests, hit ratio and Redis commands are each instance's own `/metrics` \
         (Δ`gateway_requests_total`; hits / (hits + misses + dedupes + skips), from L1 or Redis; \
         L1 hit ratio: the hits its in-process L1 gave (`gateway_cache_layer_hits_total{{layer=\"l1\"}}`) / the same calls; \
         Δ`gateway_redis_commands_total` / its requests). redis-server commands/req is the server's \
         `total_commands_processed` (summed over a cluster's masters) over all the gateways' requests: \
         the server cannot tell its clients apart. Reads checked and stale reads are loadgen's, of the \
         answers that instance gave (connection i goes to gateway i % N); the oracle is one for all, so \
         a read is stale on gateway 2 when gateway 1's write was acknowledged before it was sent."
    );
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::summary::fixtures::{measurement, summary};
    use crate::matrix::summary::{InstanceFigures, InstanceFreshness};

    fn instance(name: &str, requests: f64, hits: f64, stale: u64) -> InstanceFigures {
        InstanceFigures {
            name: name.into(),
            requests: Some(requests),
            cache_hit_ratio: Some(hits),
            redis_commands_per_request: Some(1.5),
            l1_hit_ratio: Some(hits / 2.0),
            freshness: Some(InstanceFreshness {
                responses: requests as u64,
                reads_checked: 1000,
                stale_reads: stale,
                stale_fraction: Some(stale as f64 / 1000.0),
                stale_age_p99_ms: (stale > 0).then_some(300.0),
                stale_age_max_ms: (stale > 0).then_some(900.0),
                wrong_answers: 0,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn one_row_per_gateway_under_each_configuration() {
        let mut one = measurement(1, "gw-1", 1000.0, 10.0);
        one.instances = vec![instance("gateway", 10000.0, 0.6, 0)];
        assert!(table(&summary("fleet", "gw-1", vec![one.clone()])).is_none());
        let mut two = measurement(1, "gw-2", 900.0, 12.0);
        two.redis_server_commands_per_request = Some(2.25);
        two.instances = vec![
            instance("gateway", 4500.0, 0.5, 20),
            instance("gateway-2", 4500.0, 0.4, 0),
        ];
        let s = summary("fleet", "gw-1", vec![one, two]);
        let text = table(&s).unwrap();
        assert!(
            text.contains(
                "| gw-1 | gateway-1 | 10000 | 100.0% | 60.0% | 30.0% | 1.50 | – | 1000 | 0 (0.00%) | – |"
            ),
            "{text}"
        );
        assert!(
            text.contains("| gw-2 | gateway-1 | 4500 | 50.0% | 50.0% | 25.0% | 1.50 | 2.25 | 1000 | 20 (2.00%) | 300 ms / 900 ms |"),
            "{text}"
        );
        assert!(
            text.contains(
                "|  | gateway-2 | 4500 | 50.0% | 40.0% | 20.0% | 1.50 |  | 1000 | 0 (0.00%) | – |"
            ),
            "{text}"
        );
        assert!(s.to_markdown("m").contains("**Per gateway**"));
    }
}
