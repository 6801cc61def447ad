//! `summary.md`: the table a person reads in ten seconds, with only the columns some
//! configuration has figures for, and the notes.

use std::fmt::Write as _;

use crate::bench::report::ms;
use crate::matrix::disturbance::CONTENDED_CORES;
use crate::matrix::network::PROXY_PREFIX;
use crate::matrix::summary::{Medians, Summary};

impl Summary {
    /// The human-readable table, as Markdown.
    pub fn to_markdown(&self, machine: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# {} — run {}\n", self.experiment, self.run_id);
        let _ = writeln!(
            out,
            "{} round(s), {:.0} s measured after {:.0} s warm-up per configuration, rounds interleaved{}. {machine}\n",
            self.rounds,
            self.duration_s,
            self.warmup_s,
            if self.quick { " (--quick: indicative only)" } else { "" }
        );
        // Optional columns appear only when some configuration has the figure.
        let any = |f: &dyn Fn(&Medians) -> bool| self.configs.iter().any(|c| f(&c.median));
        let profiled = any(&|m| m.rss_includes_profiler);
        let show_hit_ratio = any(&|m| m.cache_hit_ratio.is_some());
        let show_per_node = any(&|m| m.instance_hit_ratios.len() > 1);
        let show_redis_commands = any(&|m| m.redis_commands_per_request.is_some());
        let show_redis_trips = any(&|m| m.redis_round_trips_per_request.is_some());
        let show_redis_server = any(&|m| m.redis_server_commands_per_request.is_some());
        let show_keys_per_master = any(&|m| !m.redis_keys_per_master.is_empty());
        let show_storage_errors = any(&|m| m.storage_errors.is_some());
        let show_cpu_per_request = any(&|m| !m.cpu_us_per_request.is_empty());
        let show_freshness = any(&|m| m.reads_checked.is_some());
        let show_coverage = any(&|m| m.profile_coverage.is_some());
        let mut header = format!(
            "| config | req/s | vs {} | p50 | p99 | upstream/req | gateway CPU | RSS start/peak/end |",
            self.baseline
        );
        let mut rule = String::from("|---|---:|---:|---:|---:|---:|---:|---:|");
        if profiled {
            header.push_str(" RSS warm-up peak (no profiler) |");
            rule.push_str("---:|");
        }
        header.push_str(" VmHWM (incl. profiler) | cache hit/miss/dedupe |");
        rule.push_str("---:|---:|");
        for (shown, title) in [
            (show_hit_ratio, "hit ratio"),
            (show_per_node, "hit ratio per gateway"),
            (show_redis_commands, "redis commands/req"),
            (show_redis_trips, "redis round trips/req"),
            (show_redis_server, "redis-server commands/req"),
            (show_keys_per_master, "keys per cluster master"),
            (show_storage_errors, "storage errors"),
            (show_freshness, "reads checked"),
            (show_freshness, "stale reads"),
            (show_freshness, "stale age p50 / p99 / max"),
            (show_freshness, "wrong answers"),
            (show_coverage, "profile coverage"),
        ] {
            if shown {
                header.push_str(&format!(" {title} |"));
                rule.push_str("---:|");
            }
        }
        header.push_str(" errors | flamegraph |");
        rule.push_str("---:|---|");
        let _ = writeln!(out, "{header}");
        let _ = writeln!(out, "{rule}");
        for c in &self.configs {
            let m = &c.median;
            let rps = match c.requests_per_sec {
                Some(s) if self.rounds > 1 => {
                    format!("{:.0} ({:.0}–{:.0})", s.median, s.min, s.max)
                }
                _ => format!("{:.0}", m.requests_per_sec),
            };
            let interval = c
                .against_baseline
                .as_ref()
                .and_then(|a| a.requests_per_sec.as_ref());
            let mut ratio = match (interval, c.ratio) {
                (Some(i), _) => i.text(2),
                // The baseline against itself: 1 in every round.
                (None, Some(s)) if s.min == 1.0 && s.max == 1.0 => "1.00x".into(),
                (None, Some(s)) if self.rounds > 1 => {
                    format!("{:.2}x ({:.2}–{:.2})", s.median, s.min, s.max)
                }
                (None, Some(s)) => format!("{:.2}x", s.median),
                (None, None) => "–".into(),
            };
            if let Some(own) = &c.baseline {
                ratio.push_str(&format!(" vs {own}"));
            }
            let cache = match (m.cache_hits, m.cache_misses, m.cache_dedupes) {
                (None, None, None) => "–".to_string(),
                (h, mi, d) => format!("{}/{}/{}", count(h), count(mi), count(d)),
            };
            let flame = match (&c.flamegraph, &c.flamegraph_note) {
                (Some(f), _) => match &c.flamegraph_diff {
                    Some(d) => format!("[svg]({f}) · [against the baseline]({d})"),
                    None => format!("[svg]({f})"),
                },
                (None, Some(_)) => "none (see notes)".into(),
                (None, None) => "–".into(),
            };
            let several = m.gateways > 1;
            let cpu = m.gateway_cpu_cores.map_or("–".into(), |c| {
                if several {
                    format!("{c:.2} cores (sum of {})", m.gateways)
                } else {
                    format!("{c:.2} cores")
                }
            });
            let rss = match (m.rss_start_mib, m.rss_peak_mib, m.rss_end_mib) {
                (None, None, None) => "–".to_string(),
                (a, b, e) => {
                    let mib = |v: Option<f64>| v.map_or("–".into(), |x| format!("{x:.1}"));
                    let of = if several {
                        format!(" (max of {})", m.gateways)
                    } else {
                        String::new()
                    };
                    format!("{}/{}/{} MiB{of}", mib(a), mib(b), mib(e))
                }
            };
            let hwm = m.gateway_peak_rss_bytes.map_or("–".into(), |b| {
                format!("{:.1} MiB", b / (1024.0 * 1024.0))
            });
            let mut row = format!(
                "| {} | {rps} | {ratio} | {} | {} | {} | {cpu} | {rss} |",
                c.name,
                ms(m.p50_ms),
                ms(m.p99_ms),
                m.upstream_per_request
                    .map_or("–".into(), |u| format!("{u:.2}")),
            );
            if profiled {
                let warm = m
                    .rss_warmup_peak_mib
                    .map_or("–".into(), |x| format!("{x:.1} MiB"));
                row.push_str(&format!(" {warm} |"));
            }
            row.push_str(&format!(" {hwm} | {cache} |"));
            let percent = |v: Option<f64>| v.map_or("–".into(), |x| format!("{:.1}%", x * 100.0));
            let two = |v: Option<f64>| v.map_or("–".into(), per_request);
            if show_hit_ratio {
                row.push_str(&format!(" {} |", percent(m.cache_hit_ratio)));
            }
            if show_per_node {
                let cell = if m.instance_hit_ratios.len() > 1 {
                    m.instance_hit_ratios
                        .iter()
                        .map(|r| percent(*r))
                        .collect::<Vec<_>>()
                        .join(" / ")
                } else {
                    "–".into()
                };
                row.push_str(&format!(" {cell} |"));
            }
            if show_redis_commands {
                row.push_str(&format!(" {} |", two(m.redis_commands_per_request)));
            }
            if show_redis_trips {
                row.push_str(&format!(" {} |", two(m.redis_round_trips_per_request)));
            }
            if show_redis_server {
                row.push_str(&format!(" {} |", two(m.redis_server_commands_per_request)));
            }
            if show_keys_per_master {
                let cell = if m.redis_keys_per_master.is_empty() {
                    "–".to_string()
                } else {
                    m.redis_keys_per_master
                        .iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(" / ")
                };
                row.push_str(&format!(" {cell} |"));
            }
            if show_storage_errors {
                row.push_str(&format!(" {} |", count(m.storage_errors)));
            }
            if show_freshness {
                let stale = m
                    .stale_fraction
                    .map_or("–".into(), crate::matrix::error_budget::percent);
                let ages = if m.stale_fraction.is_some_and(|f| f > 0.0) {
                    format!(
                        "{} / {} / {}",
                        opt_ms(m.stale_age_p50_ms),
                        opt_ms(m.stale_age_p99_ms),
                        opt_ms(m.stale_age_max_ms)
                    )
                } else {
                    "–".into()
                };
                let wrong = match m.wrong_answers {
                    Some(0) => "0".to_string(),
                    Some(n) => format!("**{n}**"),
                    None => "–".into(),
                };
                row.push_str(&format!(
                    " {} | {stale} | {ages} | {wrong} |",
                    count(m.reads_checked)
                ));
            }
            if show_coverage {
                row.push_str(&format!(" {} |", percent(m.profile_coverage)));
            }
            let errors = match crate::matrix::error_budget::over_rounds(c) {
                Some((total, rate, classes)) => format!(
                    "**{total}** ({}: {classes})",
                    crate::matrix::error_budget::percent(rate)
                ),
                None => "0".into(),
            };
            row.push_str(&format!(" {errors} | {flame} |"));
            let _ = writeln!(out, "{row}");
        }
        let _ = writeln!(
            out,
            "\nMedians over rounds (min–max in round brackets). Ratios are taken within each round against `{}` (or the configuration the cell names); \
             with two rounds or more, a ratio is their geometric mean with its 95% interval in square brackets (see the next table). \
             upstream/req: subgraph requests per client request. Cache counters are totals over the measured window. \
             RSS start/peak/end: the gateway's VmRSS before the load, its largest sample (every ~100 ms over warm-up and window) \
             and at the window's end, before the profile is rendered; VmHWM is the kernel's peak at the end, profiler included.{}{}{}",
            self.baseline,
            if profiled {
                " The profiler runs through the window and grows the first gateway by well over 100 MiB as soon as it \
                 starts sampling, so window RSS (peak, end) includes it; the warm-up peak is the load's memory before \
                 the profiler starts. For memory figures over the whole window, set `[profile] enabled = false`."
            } else {
                ""
            },
            if show_hit_ratio {
                " hit ratio: hits / (hits + misses + dedupes + skips)."
            } else {
                ""
            },
            if show_redis_commands || show_redis_trips || show_redis_server {
                " Redis figures are per client request (Δ over the window / Δ`gateway_requests_total`)."
            } else {
                ""
            }
        );
        let peers: Vec<_> = self
            .configs
            .iter()
            .filter_map(|c| Some((c, c.peer.as_ref()?)))
            .collect();
        if !peers.is_empty() {
            let _ = writeln!(
                out,
                "\n**Peer gateways**, run in place of the lab's on the same subgraphs, load and rounds; \
                 their answers are checked as the lab's are, before and after every window, and their CPU \
                 sums their whole process tree. What a peer's cache kept is read from its `/metrics` where \
                 its launcher serves one in the lab's names (apollo-gateway); the others serve none, and \
                 their upstream counters are the subgraphs'.\n\n\
                 | config | peer, cache and versions | what its cache kept | runs with |\n|---|---|---|---|"
            );
            for (config, peer) in peers {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} |",
                    config.name,
                    peer.describe(),
                    super::peer_cache::kept(peer, &config.median),
                    peer.settings
                );
            }
        }
        if let Some(table) = super::declared_differences::table(self) {
            out.push_str(&table);
        }
        if let Some(table) = super::requests_sent::table(self) {
            out.push_str(&table);
        }
        if let Some(table) = super::edge::table(self) {
            out.push_str(&table);
        }
        if let Some(table) = super::against_baseline::table(self) {
            out.push_str(&table);
        }
        if show_cpu_per_request {
            self.cpu_table(&mut out);
        }
        if let Some(table) = super::round_trips::table(self) {
            out.push_str(&table);
        }
        if let Some(table) = super::per_gateway::table(self) {
            out.push_str(&table);
        }
        if let Some(table) = super::cache_memory::table(self) {
            out.push_str(&table);
        }
        self.error_places_table(&mut out);
        if let Some(table) = super::overload::table(self) {
            out.push_str(&table);
        }
        if show_freshness {
            let _ = writeln!(
                out,
                "\nFreshness: every entity in every answer is checked against the newest write of it that loadgen \
                 saw acknowledged before the read was sent. stale reads: reads that returned an older version / \
                 reads checked (median of rounds); stale age: read start − that acknowledgement (medians of the \
                 rounds' p50 and p99, the largest max). wrong answers: answers that cannot be right (another \
                 user's `me`, another entity's data), summed over rounds; they must be 0."
            );
        }
        if show_coverage {
            let _ = writeln!(
                out,
                "\nprofile coverage: samples in the gateway's flamegraph / (its CPU seconds while sampled × Hz)."
            );
        }
        if any(&|m| m.gateways > 1) {
            let _ = writeln!(
                out,
                "\nSeveral gateways: connections round robin over the instances; counters and CPU are summed over them, \
                 RSS is the largest instance's (the first, profiled one, when profiling is on); \
                 hit ratio per gateway is each instance's own, in start order."
            );
        }
        out.push_str(&super::timeline::markdown(self));
        if !self.warnings.is_empty() {
            let _ = writeln!(out, "\n**Notes**\n");
            for w in &self.warnings {
                let _ = writeln!(out, "- {w}");
            }
        }
        out
    }
}

/// A per-request figure: two decimals, more when it is small but not zero (a layered
/// cache's 0.0026 Redis commands per request must not read as 0.00).
fn per_request(x: f64) -> String {
    if x != 0.0 && x.abs() < 0.01 {
        format!("{x:.4}")
    } else {
        format!("{x:.2}")
    }
}

impl Summary {
    /// Where the GraphQL errors were, per configuration (only when there were some).
    fn error_places_table(&self, out: &mut String) {
        let mut rows = Vec::new();
        for c in &self.configs {
            let mut places: std::collections::BTreeMap<&str, u64> = Default::default();
            for round in &c.rounds {
                for (place, n) in &round.error_paths {
                    *places.entry(place).or_default() += n;
                }
            }
            let answers: u64 = c.rounds.iter().map(|r| r.requests).sum();
            for (place, n) in places {
                rows.push(format!("| {} | `{place}` | {n} of {answers} |", c.name));
            }
        }
        if rows.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "\n**Where the GraphQL errors were** (answers carrying an error at each place of \
             the answer, list indices as `[]`; summed over rounds, of all answers)\n"
        );
        let _ = writeln!(out, "| config | error at | answers |\n|---|---|---:|");
        for row in rows {
            let _ = writeln!(out, "{row}");
        }
    }

    /// CPU per client request and cores, per process and configuration, and what the
    /// rest of the machine was busy with.
    fn cpu_table(&self, out: &mut String) {
        // The gateway, every subgraph in the order the rounds list them, loadgen, and
        // the latency proxies (summed) only when a configuration ran some.
        let mut processes = vec!["gateway"];
        for c in &self.configs {
            for p in c.rounds.iter().flat_map(|m| &m.cpu) {
                let name = p.name.as_str();
                if !matches!(name, "gateway" | "loadgen")
                    && !name.starts_with(PROXY_PREFIX)
                    && !processes.contains(&name)
                {
                    processes.push(name);
                }
            }
        }
        // Subgraphs the runner did not start (a graph's own, by URL) have no column.
        let unsampled_subgraphs = processes.len() == 1;
        processes.push("loadgen");
        if self
            .configs
            .iter()
            .any(|c| c.median.cpu_cores.contains_key(PROXY_PREFIX))
        {
            processes.push(PROXY_PREFIX);
        }
        let _ = writeln!(
            out,
            "\n**CPU per client request** (µs, with cores in brackets; medians over rounds)\n"
        );
        let _ = writeln!(
            out,
            "| config | {} | rest of the machine (cores) |",
            processes.join(" | ")
        );
        let _ = writeln!(out, "|---|{}---:|", "---:|".repeat(processes.len()));
        let mut contended = Vec::new();
        for c in &self.configs {
            let m = &c.median;
            let cells: Vec<String> = processes
                .iter()
                .map(
                    |p| match (m.cpu_us_per_request.get(*p), m.cpu_cores.get(*p)) {
                        (Some(us), Some(cores)) => format!("{us:.0} ({cores:.2})"),
                        (Some(us), None) => format!("{us:.0}"),
                        _ => "–".into(),
                    },
                )
                .collect();
            let rest = m.other_cores.map_or("–".into(), |r| format!("{r:.2}"));
            if m.other_cores.is_some_and(|r| r > CONTENDED_CORES) {
                contended.push(format!("{} ({rest})", c.name));
            }
            let _ = writeln!(out, "| {} | {} | {rest} |", c.name, cells.join(" | "));
        }
        let _ = writeln!(
            out,
            "\nEach process's CPU time over the window (`/proc/<pid>/stat`, user + system) per client request \
             answered in it; the gateway's instances summed. Steadier than req/s on shared cores. \
             Rest of the machine: its busy cores minus these processes' (perf, redis-server and \
             anything else running)."
        );
        if unsampled_subgraphs {
            let _ = writeln!(
                out,
                "\nThe subgraphs were not started by the runner (the experiment names them by URL), so \
                 their CPU is not measured per process: it is part of the rest of the machine."
            );
        }
        if !contended.is_empty() {
            let _ = writeln!(
                out,
                "\n**Warning: the rest of the machine (perf, redis-server, other work) held more than {CONTENDED_CORES} cores during {}.** \
                 Those configurations shared the machine with it: their req/s and ratios are not \
                 the lab's alone (CPU per request moves less).",
                contended.join(", ")
            );
        }
    }
}

fn opt_ms(v: Option<f64>) -> String {
    v.map_or("–".into(), ms)
}

fn count(v: Option<f64>) -> String {
    v.map_or("–".into(), |x| format!("{x:.0}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::aggregation::{hit_ratio, set_ratios};
    use crate::matrix::summary::fixtures::{self, measurement};
    use crate::matrix::summary::{ConfigSummary, InstanceFigures, Measurement, SCHEMA};

    #[test]
    fn redis_and_multi_gateway_columns_appear_only_with_their_figures() {
        let plain = measurement(1, "memory", 1000.0, 10.0);
        let mut redis = measurement(1, "layered-2", 900.0, 12.0);
        redis.gateways = 2;
        redis.cache_hits = Some(80.0);
        redis.cache_misses = Some(15.0);
        redis.cache_dedupes = Some(5.0);
        redis.cache_hit_ratio = hit_ratio(Some(80.0), Some(15.0), Some(5.0), None);
        redis.redis_commands_per_request = Some(1.5);
        redis.redis_round_trips_per_request = Some(0.25);
        redis.storage_errors = Some(3.0);
        redis.rss_includes_profiler = true;
        redis.instances = vec![
            InstanceFigures {
                name: "gateway".into(),
                cache_hit_ratio: Some(0.75),
                ..Default::default()
            },
            InstanceFigures {
                name: "gateway-2".into(),
                cache_hit_ratio: Some(0.85),
                ..Default::default()
            },
        ];
        assert_eq!(redis.cache_hit_ratio, Some(0.8));
        assert_eq!(hit_ratio(None, None, None, None), None);
        assert_eq!(hit_ratio(Some(0.0), Some(0.0), None, None), None);
        let summary = |ms: Vec<Measurement>| fixtures::summary("redis", "memory", ms);
        let without = summary(vec![plain.clone()]).to_markdown("m");
        for absent in [
            "redis commands/req",
            "round trips/req",
            "storage errors",
            "hit ratio",
            "per gateway",
            "warm-up peak",
        ] {
            assert!(!without.contains(absent), "{absent}: {without}");
        }
        assert!(without.contains("| 10.0/15.0/14.0 MiB |"), "{without}");
        let s = summary(vec![plain, redis]);
        let md = s.to_markdown("m");
        assert!(
            md.contains("| hit ratio | hit ratio per gateway | redis commands/req | redis round trips/req | storage errors |"),
            "{md}"
        );
        assert!(
            md.contains("| 80.0% | 75.0% / 85.0% | 1.50 | 0.25 | 3 |"),
            "{md}"
        );
        assert!(md.contains("0.90 cores (sum of 2)"), "{md}");
        assert_eq!(per_request(0.0026), "0.0026");
        assert_eq!(per_request(0.0), "0.00");
        assert_eq!(per_request(1.234), "1.23");
        assert!(
            md.contains("10.0/15.0/14.0 MiB (max of 2) | 13.0 MiB |"),
            "{md}"
        );
        // The baseline has none of these figures: dashes, not zeros.
        assert!(md.contains("| – | – | – | – | – |"), "{md}");
        assert!(
            s.warnings
                .iter()
                .any(|w| w.contains("storage failed 3 time(s)")),
            "{:?}",
            s.warnings
        );
        assert_eq!(
            s.configs[1].median.instance_hit_ratios,
            [Some(0.75), Some(0.85)]
        );
        // Older summaries without the new keys still read.
        let mut old = serde_json::to_value(&s).unwrap();
        for c in old["configs"].as_array_mut().unwrap() {
            for key in ["gateways", "redis", "own_query"] {
                c.as_object_mut().unwrap().remove(key);
            }
            for m in c["rounds"].as_array_mut().unwrap() {
                for key in ["gateways", "instances", "rss_start_mib", "cache_hit_ratio"] {
                    m.as_object_mut().unwrap().remove(key);
                }
            }
        }
        let back: Summary = serde_json::from_value(old).unwrap();
        assert_eq!(back.configs[1].gateways, 1);
        assert_eq!(back.configs[1].rounds[0].gateways, 1);
    }

    #[test]
    fn the_rest_of_the_machine_is_shown_and_a_contended_configuration_flagged() {
        use crate::matrix::sampling::ProcessCpu;
        let with_cpu = |config: &str, busy: f64| {
            let mut m = measurement(1, config, 1000.0, 10.0);
            m.machine_busy_cores = Some(busy);
            m.cpu = [("gateway", 0.9), ("loadgen", 0.2)]
                .into_iter()
                .map(|(name, cores)| ProcessCpu {
                    name: name.into(),
                    cpu_seconds: Some(cores * 10.0),
                    cores: Some(cores),
                    us_per_request: Some(cores * 1000.0),
                })
                .collect();
            ConfigSummary::from_rounds(
                config,
                None,
                Default::default(),
                serde_json::json!({}),
                vec![m],
            )
        };
        let summary = |configs| Summary {
            schema: SCHEMA.into(),
            run_id: "r".into(),
            experiment: "seed".into(),
            baseline: "quiet".into(),
            rounds: 1,
            duration_s: 10.0,
            warmup_s: 2.0,
            quick: false,
            configs,
            warnings: vec![],
        };
        let quiet = summary(vec![with_cpu("quiet", 1.15)]).to_markdown("m");
        assert!(quiet.contains("| rest of the machine (cores) |"), "{quiet}");
        assert!(quiet.contains("| 0.05 |"), "{quiet}");
        assert!(
            !quiet.contains("Warning: the rest of the machine"),
            "{quiet}"
        );
        let busy = summary(vec![with_cpu("quiet", 1.15), with_cpu("busy", 1.9)]).to_markdown("m");
        assert!(busy.contains("| 0.80 |"), "{busy}");
        assert!(
            busy.contains("held more than 0.3 cores during busy (0.80).**"),
            "{busy}"
        );
    }

    #[test]
    fn markdown_has_a_row_per_config_and_the_notes() {
        let mut ms = vec![
            measurement(1, "no-cache", 1000.0, 250.0),
            measurement(1, "ttl-0", 4600.0, 46.0),
        ];
        set_ratios(&mut ms, &|_| "no-cache".to_string());
        let configs: Vec<ConfigSummary> = ms
            .iter()
            .map(|m| {
                ConfigSummary::from_rounds(
                    &m.config,
                    None,
                    Default::default(),
                    serde_json::json!({}),
                    vec![m.clone()],
                )
            })
            .collect();
        let mut s = Summary {
            schema: SCHEMA.into(),
            run_id: "r".into(),
            experiment: "seed".into(),
            baseline: "no-cache".into(),
            rounds: 1,
            duration_s: 10.0,
            warmup_s: 2.0,
            quick: false,
            configs,
            warnings: vec![],
        };
        s.configs[1].flamegraph_note =
            Some("no flamegraph (gateway built without profiling?)".into());
        s.derive_warnings();
        let md = s.to_markdown("2 cores");
        assert!(md.contains("| no-cache | 1000 | 1.00x |"), "{md}");
        assert!(md.contains("| ttl-0 | 4600 | 4.60x |"), "{md}");
        assert!(
            md.contains("ttl-0: no flamegraph (gateway built without profiling?)"),
            "{md}"
        );
    }
}
