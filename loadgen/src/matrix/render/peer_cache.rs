//! What a peer gateway's cache kept, in words, for the report's table of peers: from
//! the hits, misses (answers stored) and skips (answers its policy left uncacheable)
//! its `/metrics` counted, or why there are no such counts. Above all it says when the
//! graph's cache hints left a peer's response cache nothing to keep.

use crate::matrix::peers::install::PeerRecord;
use crate::matrix::summary::Medians;

/// `hit ratio 99.9% (0.1% stored, 0.0% not cacheable)`, `nothing: …`, `no cache`, or
/// `not reported (…)`, from the medians of the rounds.
pub fn kept(peer: &PeerRecord, median: &Medians) -> String {
    if peer.peer == "url" {
        return "not known (a gateway the runner does not start)".to_string();
    }
    if peer.cache.is_empty() {
        return "no cache".to_string();
    }
    let (Some(hits), Some(misses), Some(skips)) =
        (median.cache_hits, median.cache_misses, median.cache_skips)
    else {
        return "not reported (the peer serves no counts of its cache)".to_string();
    };
    let all = hits + misses + skips;
    if all <= 0.0 {
        return "no answer counted".to_string();
    }
    if hits + misses <= 0.0 {
        return "**nothing**: every answer was uncacheable by its policy (the subgraphs' \
                `Cache-Control` left no `max-age`, or the answer was private and the caller had \
                no session)"
            .to_string();
    }
    format!(
        "hit ratio {:.1}% ({:.1}% stored, {:.1}% not cacheable)",
        100.0 * hits / all,
        100.0 * misses / all,
        100.0 * skips / all
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(cache: &[(&str, f64)]) -> PeerRecord {
        PeerRecord {
            config: "c".into(),
            peer: "apollo-gateway".into(),
            label: "apollo-gateway".into(),
            cache: cache.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            versions: Vec::new(),
            settings: String::new(),
        }
    }

    fn counted(hits: f64, misses: f64, skips: f64) -> Medians {
        let mut m = Medians::default();
        (m.cache_hits, m.cache_misses, m.cache_skips) = (Some(hits), Some(misses), Some(skips));
        m
    }

    #[test]
    fn says_when_the_hints_left_nothing_to_keep() {
        let cached = record(&[("response_ttl", 10.0)]);
        assert!(kept(&cached, &counted(0.0, 0.0, 500.0)).starts_with("**nothing**"));
        assert_eq!(
            kept(&cached, &counted(990.0, 10.0, 0.0)),
            "hit ratio 99.0% (1.0% stored, 0.0% not cacheable)"
        );
        let bare = record(&[]);
        assert_eq!(kept(&bare, &counted(0.0, 0.0, 5.0)), "no cache");
        let m = Medians::default();
        assert!(kept(&cached, &m).starts_with("not reported"));
    }
}
