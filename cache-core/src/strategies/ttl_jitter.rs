//! `ttl-jitter`: spread each entry's TTL at random, so that keys stored together
//! do not expire together.
//!
//! This file is the worked example of `docs/strategies.md` ("write your own
//! strategy in one file"): a type, its [`Registered`] entry, one hook, a test.
//!
//! Reference: the standard mitigation for synchronized expiry, e.g. "Cache
//! stampede" (Wikipedia) and the XFetch paper's introduction (Vattani et al.,
//! VLDB 2015), which names it before proposing early recomputation. Each
//! stored entry keeps `ttl * (1 + spread * (2U - 1))`, `U` uniform in [0, 1):
//! with `spread = 0.2` a 10 s TTL becomes anything from 8 s to 12 s.
//!
//! **Trade-off.** Keys filled in one burst (a cold start, a flush, a deploy)
//! stop running out in one burst: the subgraphs see the refetches spread over
//! `2 * spread * ttl` instead of a wave each TTL, and the callers of those
//! keys stop missing all at once. The mean TTL is unchanged, so the hit ratio
//! and the staleness bound move little, but the longest-lived entries live
//! `spread` longer than the configured TTL. Unlike `early-refresh` it does not
//! stop a single hot key's callers from waiting on its expiry.
//!
//! **Cost.** One random draw per stored value, on the leader's task after its
//! followers were served; nothing on a hit. Counted as `adjusted` (admitted
//! with another lifetime).

use super::{LifetimeUse, Param, Params, Registered};
use crate::policy::Fetched;
use crate::strategy::{Admission, Lifetime, Strategy, StrategyContext};

/// Spreads each entry's TTL uniformly over `ttl * (1 ± spread)`.
pub struct TtlJitter {
    spread: f64,
}

impl TtlJitter {
    /// Spreads TTLs by up to `spread` (0.2: ±20 %) either way; at most 1.
    pub fn new(spread: f64) -> Self {
        Self {
            spread: spread.clamp(0.0, 1.0),
        }
    }
}

impl Registered for TtlJitter {
    const NAME: &'static str = "ttl-jitter";
    const SUMMARY: &'static str =
        "spread each entry's ttl at random by ±spread, so keys stored together do not expire together";
    const PARAMS: &'static [Param] = &[Param {
        name: "spread",
        default: "0.2",
        help: "how far either way, as a share of the ttl (0 to 1)",
    }];
    const LIFETIME: LifetimeUse = LifetimeUse::Adjusts;

    fn from_params(params: &Params<'_>) -> Result<Self, String> {
        let spread = params.number("spread")?;
        if spread > 1.0 {
            return Err(format!("ttl-jitter: spread={spread}: expected 0 to 1"));
        }
        Ok(Self::new(spread))
    }
}

impl<V> Strategy<V> for TtlJitter {
    fn admit(
        &self,
        _context: &StrategyContext<'_>,
        _fetched: &Fetched<V>,
        lifetime: &mut Lifetime,
    ) -> Admission {
        let factor = 1.0 + self.spread * (2.0 * rand::random::<f64>() - 1.0);
        lifetime.ttl = lifetime.ttl.mul_f64(factor);
        Admission::Store
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::key::CacheKey;
    use crate::stats::Counters;

    #[test]
    fn ttls_spread_evenly_within_the_bounds() {
        let counters = Counters::default();
        let key = CacheKey::builder("Query.n").finish();
        let context = StrategyContext::new("Query.n", key, Instant::now(), &counters, "ttl-jitter");
        let strategy = TtlJitter::new(0.2);
        let ttls: Vec<f64> = (0..10_000)
            .map(|_| {
                let mut lifetime = Lifetime::new(Duration::from_secs(10), Duration::ZERO);
                let fetched = Fetched::new(());
                assert_eq!(
                    strategy.admit(&context, &fetched, &mut lifetime),
                    Admission::Store
                );
                lifetime.ttl.as_secs_f64()
            })
            .collect();
        assert!(ttls.iter().all(|t| (8.0..=12.0).contains(t)), "within ±20 %");
        let below_9 = ttls.iter().filter(|t| **t < 9.0).count();
        let above_11 = ttls.iter().filter(|t| **t > 11.0).count();
        // A quarter of the range each: 2 500 expected, 5 sigma is about 220.
        for n in [below_9, above_11] {
            assert!((2_250..2_750).contains(&n), "{below_9} below 9 s, {above_11} above 11 s");
        }
        assert!(super::super::parse_and_build::<()>("ttl-jitter:spread=2").is_err());
    }
}
