//! The "Redis round trips" table of `summary.md`: per configuration with a Redis, the
//! network between the gateway and its services, req/s and p99 beside the Redis round
//! trips each client request cost and the keys each round trip carried.
//!
//! This is the table that says why auto-pipelining matters across a network: with a
//! round trip of `rtt`, a request that needs `n` sequential round trips waits at least
//! `n × rtt`, and auto-pipelining lowers `n` by putting many keys in one `MGET`.

use std::fmt::Write as _;

use crate::bench::report::ms;
use crate::matrix::summary::Summary;

/// The table, or `None` when no configuration has Redis figures.
pub fn table(summary: &Summary) -> Option<String> {
    let rows: Vec<_> = summary
        .configs
        .iter()
        .filter(|c| c.median.redis_round_trips_per_request.is_some())
        .collect();
    if rows.is_empty() {
        return None;
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n**Redis round trips** (medians over rounds; network: the RTT a `loadgen netproxy` added in front of each service)\n"
    );
    let _ = writeln!(
        out,
        "| config | network | req/s | p99 | redis round trips/req | keys/round trip | redis commands/req | storage errors |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|");
    let two = |v: Option<f64>| v.map_or("–".into(), |x| format!("{x:.2}"));
    for c in rows {
        let m = &c.median;
        let network = if c.network.is_empty() {
            "loopback".to_string()
        } else {
            c.network.clone()
        };
        let _ = writeln!(
            out,
            "| {} | {network} | {:.0} | {} | {} | {} | {} | {} |",
            c.name,
            m.requests_per_sec,
            ms(m.p99_ms),
            two(m.redis_round_trips_per_request),
            two(m.redis_keys_per_round_trip),
            two(m.redis_commands_per_request),
            m.storage_errors.map_or("–".into(), |e| format!("{e:.0}")),
        );
    }
    let _ = writeln!(
        out,
        "\nRound trips and commands per client request: Δ`gateway_redis_round_trips_total` and \
         Δ`gateway_redis_commands_total` over Δ`gateway_requests_total`. Keys per round trip: \
         Δ`gateway_redis_keys_read_total` / Δ`gateway_redis_round_trips_total` (writes count as \
         round trips without keys read, so they pull it down)."
    );
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::summary::fixtures::{measurement, summary};

    #[test]
    fn only_configurations_with_redis_figures_are_listed_with_their_network() {
        let memory = measurement(1, "memory", 1000.0, 10.0);
        assert!(
            table(&summary("redis-network", "memory", vec![memory.clone()])).is_none(),
            "no Redis figures, no table"
        );
        let mut redis = measurement(1, "redis-2ms", 400.0, 30.0);
        redis.redis_round_trips_per_request = Some(1.25);
        redis.redis_keys_per_round_trip = Some(12.0);
        redis.redis_commands_per_request = Some(3.5);
        let mut both = summary("redis-network", "memory", vec![memory, redis]);
        both.configs[1].network = "redis: 2 ms".into();
        let text = table(&both).unwrap();
        assert!(
            text.contains("| redis-2ms | redis: 2 ms | 400 | 30.0 ms | 1.25 | 12.00 | 3.50 | – |"),
            "{text}"
        );
        assert!(!text.contains("| memory |"), "{text}");
        assert!(both.to_markdown("m").contains("**Redis round trips**"));
    }
}
