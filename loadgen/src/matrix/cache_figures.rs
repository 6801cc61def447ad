//! What the gateways' caches held at the end of a window, and how often an entry one
//! operation stored answered another: read from the gateways' `/metrics`
//! (`gateway_cache_entries` and `gateway_cache_bytes`, gauges read at the window's end;
//! `gateway_cache_cross_operation_total` and `gateway_cache_hits_total`, counted over
//! the window), per namespace and in all, summed over the instances.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::scraping::{Scrape, WindowMetrics};
use super::summary::Measurement;

const ENTRIES: &str = "gateway_cache_entries";
const BYTES: &str = "gateway_cache_bytes";
const CROSSED: &str = "gateway_cache_cross_operation_total";
const HITS: &str = "gateway_cache_hits_total";

/// One namespace's figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NamespaceFigures {
    /// Entries held and their bytes at the window's end.
    pub entries: Option<f64>,
    pub bytes: Option<f64>,
    /// Hits in the window, and those on an entry another operation stored.
    pub hits: Option<f64>,
    pub cross_operation_hits: Option<f64>,
    /// Calls that joined (or found stored on the way) a fetch another operation made.
    pub cross_operation_in_flight: Option<f64>,
}

/// The caches' figures of one window (one round), or their medians over rounds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheFigures {
    pub entries: Option<f64>,
    pub bytes: Option<f64>,
    pub cross_operation_hits: Option<f64>,
    pub cross_operation_in_flight: Option<f64>,
    /// By cache namespace (`Query.product`, `Product.name+price`).
    #[serde(default)]
    pub by_namespace: BTreeMap<String, NamespaceFigures>,
}

/// Per namespace, a gauge's value summed over `gateways` in the scrapes `at`.
fn gauge_by_namespace(
    at: &BTreeMap<String, Scrape>,
    gateways: &[String],
    metric: &str,
) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for g in gateways {
        for s in at.get(g).iter().flat_map(|s| &s.samples) {
            if s.name == metric {
                let ns = s.labels.get("namespace").cloned().unwrap_or_default();
                *out.entry(ns).or_insert(0.0) += s.value;
            }
        }
    }
    out
}

/// Per namespace, a counter's window difference summed over the gateways, only its
/// series whose label `how` is `how` (any when `None`).
fn counted_by_namespace(
    m: &WindowMetrics,
    metric: &str,
    how: Option<&str>,
) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for g in &m.gateways {
        for s in m.delta.get(g).iter().flat_map(|d| &d.samples) {
            if s.name == metric && how.is_none_or(|h| s.labels.get("how").is_some_and(|v| v == h)) {
                let ns = s.labels.get("namespace").cloned().unwrap_or_default();
                *out.entry(ns).or_insert(0.0) += s.value;
            }
        }
    }
    out
}

impl CacheFigures {
    /// The window's figures: counters from `metrics`, gauges from the scrapes `after`
    /// it; `None` when no gateway reports either (no cache, or an older gateway).
    pub fn of_window(
        metrics: &WindowMetrics,
        after: &BTreeMap<String, Scrape>,
    ) -> Option<CacheFigures> {
        let has = |metric: &str| {
            metrics
                .gateways
                .iter()
                .any(|g| after.get(g).is_some_and(|s| s.has(metric)))
        };
        let (held, crossed) = (has(ENTRIES), has(CROSSED));
        if !held && !crossed {
            return None;
        }
        let entries = gauge_by_namespace(after, &metrics.gateways, ENTRIES);
        let bytes = gauge_by_namespace(after, &metrics.gateways, BYTES);
        let hits = counted_by_namespace(metrics, HITS, None);
        let cross_hits = counted_by_namespace(metrics, CROSSED, Some("hit"));
        let cross_flight = counted_by_namespace(metrics, CROSSED, Some("in_flight"));
        let mut by_namespace: BTreeMap<String, NamespaceFigures> = BTreeMap::new();
        for (map, set) in [
            (&entries, 0usize),
            (&bytes, 1),
            (&hits, 2),
            (&cross_hits, 3),
            (&cross_flight, 4),
        ] {
            for (ns, v) in map {
                let f = by_namespace.entry(ns.clone()).or_default();
                let slot = match set {
                    0 => &mut f.entries,
                    1 => &mut f.bytes,
                    2 => &mut f.hits,
                    3 => &mut f.cross_operation_hits,
                    _ => &mut f.cross_operation_in_flight,
                };
                *slot = Some(*v);
            }
        }
        let total =
            |map: &BTreeMap<String, f64>, present: bool| present.then(|| map.values().sum());
        Some(CacheFigures {
            entries: total(&entries, held),
            bytes: total(&bytes, held),
            cross_operation_hits: total(&cross_hits, crossed),
            cross_operation_in_flight: total(&cross_flight, crossed),
            by_namespace,
        })
    }

    /// The medians over rounds, figure by figure and namespace by namespace.
    pub fn median(rounds: &[Measurement]) -> Option<CacheFigures> {
        let all: Vec<&CacheFigures> = rounds.iter().filter_map(|m| m.cache.as_ref()).collect();
        if all.is_empty() {
            return None;
        }
        let median = |values: Vec<Option<f64>>| {
            let mut v: Vec<f64> = values.into_iter().flatten().collect();
            v.sort_by(f64::total_cmp);
            match v.len() {
                0 => None,
                n if n % 2 == 1 => Some(v[n / 2]),
                n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
            }
        };
        let of =
            |pick: fn(&CacheFigures) -> Option<f64>| median(all.iter().map(|c| pick(c)).collect());
        let mut names: Vec<&String> = all.iter().flat_map(|c| c.by_namespace.keys()).collect();
        names.sort();
        names.dedup();
        let by_namespace = names
            .into_iter()
            .map(|ns| {
                let of = |pick: fn(&NamespaceFigures) -> Option<f64>| {
                    median(
                        all.iter()
                            .map(|c| c.by_namespace.get(ns).and_then(pick))
                            .collect(),
                    )
                };
                (
                    ns.clone(),
                    NamespaceFigures {
                        entries: of(|f| f.entries),
                        bytes: of(|f| f.bytes),
                        hits: of(|f| f.hits),
                        cross_operation_hits: of(|f| f.cross_operation_hits),
                        cross_operation_in_flight: of(|f| f.cross_operation_in_flight),
                    },
                )
            })
            .collect();
        Some(CacheFigures {
            entries: of(|c| c.entries),
            bytes: of(|c| c.bytes),
            cross_operation_hits: of(|c| c.cross_operation_hits),
            cross_operation_in_flight: of(|c| c.cross_operation_in_flight),
            by_namespace,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_are_read_at_the_end_and_counters_over_the_window() {
        let before = Scrape::parse(
            "gateway_cache_hits_total{namespace=\"User.name\"} 10\n\
             gateway_cache_cross_operation_total{namespace=\"User.name\",how=\"hit\"} 4\n\
             gateway_cache_cross_operation_total{namespace=\"User.name\",how=\"in_flight\"} 0\n\
             gateway_cache_entries{namespace=\"User.name\"} 3\n",
        );
        let after = Scrape::parse(
            "gateway_cache_hits_total{namespace=\"User.name\"} 110\n\
             gateway_cache_cross_operation_total{namespace=\"User.name\",how=\"hit\"} 64\n\
             gateway_cache_cross_operation_total{namespace=\"User.name\",how=\"in_flight\"} 2\n\
             gateway_cache_entries{namespace=\"User.name\"} 7\n\
             gateway_cache_bytes{namespace=\"User.name\"} 7000\n\
             gateway_cache_entries{namespace=\"Query.me\"} 1\n\
             gateway_cache_bytes{namespace=\"Query.me\"} 500\n",
        );
        let gateways = vec!["gateway".to_string()];
        let before = BTreeMap::from([("gateway".to_string(), before)]);
        let after = BTreeMap::from([("gateway".to_string(), after)]);
        let m = WindowMetrics::between(&before, &after, gateways, None);
        let f = CacheFigures::of_window(&m, &after).unwrap();
        assert_eq!((f.entries, f.bytes), (Some(8.0), Some(7500.0)));
        assert_eq!(
            (f.cross_operation_hits, f.cross_operation_in_flight),
            (Some(60.0), Some(2.0))
        );
        let user = &f.by_namespace["User.name"];
        assert_eq!(
            (user.hits, user.cross_operation_hits),
            (Some(100.0), Some(60.0))
        );
        assert_eq!(f.by_namespace["Query.me"].hits, None);
        let none = BTreeMap::from([("gateway".to_string(), Scrape::default())]);
        let m = WindowMetrics::between(&none, &none, vec!["gateway".into()], None);
        assert!(CacheFigures::of_window(&m, &none).is_none());
    }
}
