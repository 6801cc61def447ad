//! `early-refresh`: probabilistic early recomputation (XFetch).
//!
//! Reference: A. Vattani, F. Chierichetti, K. Lowenstein, "Optimal
//! Probabilistic Cache Stampede Prevention", VLDB 2015. On each hit at time
//! `now` of an entry that expires at `expiry` and took `delta` to fetch,
//! refresh it now if
//!
//! ```text
//! now - delta * beta * ln(U) >= expiry,     U uniform in (0, 1]
//! ```
//!
//! The closer the expiry and the slower the fetch, the likelier a refresh;
//! with `beta = 1` the paper proves the expected refresh lands about `delta`
//! before expiry, so readers of a popular key never see it expire. `beta > 1`
//! refreshes earlier, `beta < 1` later; `0` never.
//!
//! The cache keeps the dedupe guarantee around it: a refresh is a flight in
//! the dedupe table, so whatever this strategy says, at most one fetch of a
//! key is in flight (a hit that wants one while one runs is counted as
//! `early_refresh_in_flight` and served). Entries carry their fetch duration
//! (`Stored::fetched_in`) for `delta`.
//!
//! **Trade-off.** Expiry stops blocking readers and the subgraph sees
//! refreshes spread over time instead of in waves, for some extra upstream
//! requests: keys are refetched a little before they would have expired,
//! and a key read once after its refresh was due is refetched although
//! nobody reads it again. Rarely read keys gain nothing (the refresh needs
//! a hit close to expiry); a fetch that is instant (`delta = 0`) never
//! refreshes early.
//!
//! **Cost.** On a hit far from expiry (more than 36 `delta * beta` away, where
//! the chance is below 1e-15), one subtraction; closer, one random draw
//! and a logarithm.

use super::{LifetimeUse, Param, Params, Registered};
use crate::storage::Stored;
use crate::strategy::{Strategy, StrategyContext};

/// Beyond this many `delta * beta` before expiry the chance of a refresh is
/// below `e^-36` (about 2e-16): the draw is skipped.
const CUTOFF: f64 = 36.0;

/// XFetch (see the module documentation).
pub struct EarlyRefresh {
    beta: f64,
}

impl EarlyRefresh {
    /// Refreshes with XFetch's `beta` (1 is the paper's optimum).
    pub fn new(beta: f64) -> Self {
        Self { beta }
    }
}

impl Registered for EarlyRefresh {
    const NAME: &'static str = "early-refresh";
    const SUMMARY: &'static str =
        "refresh a hit before it expires, more likely the nearer its expiry and the slower its fetch (XFetch, VLDB 2015)";
    const PARAMS: &'static [Param] = &[Param {
        name: "beta",
        default: "1.0",
        help: "how early: >1 earlier, <1 later, 0 never",
    }];
    const LIFETIME: LifetimeUse = LifetimeUse::OnFreshHits;

    fn from_params(params: &Params<'_>) -> Result<Self, String> {
        Ok(Self::new(params.number("beta")?))
    }
}

impl<V> Strategy<V> for EarlyRefresh {
    fn refresh_early(&self, context: &StrategyContext<'_>, entry: &Stored<V>) -> bool {
        let scale = entry.fetched_in.as_secs_f64() * self.beta;
        if scale <= 0.0 {
            return false;
        }
        let remaining = entry
            .fresh_until
            .saturating_duration_since(context.now)
            .as_secs_f64();
        if remaining > scale * CUTOFF {
            return false;
        }
        // 1 - U is uniform in (0, 1]: its logarithm is finite.
        let u: f64 = 1.0 - rand::random::<f64>();
        -u.ln() * scale >= remaining
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::key::CacheKey;
    use crate::stats::Counters;

    /// How often XFetch says yes for an entry `remaining` from expiry whose
    /// fetch took 100 ms, over `trials` hits.
    fn share(beta: f64, remaining: Duration, trials: u32) -> f64 {
        let counters = Counters::default();
        let now = Instant::now();
        let context = StrategyContext::new("Query.n", CacheKey::builder("Query.n").finish(), now, &counters, "early-refresh");
        let entry = Stored {
            value: (),
            fresh_until: now + remaining,
            stale_until: now + remaining,
            fetched_in: Duration::from_millis(100),
        };
        let strategy = EarlyRefresh::new(beta);
        let yes = (0..trials)
            .filter(|_| Strategy::<()>::refresh_early(&strategy, &context, &entry))
            .count();
        yes as f64 / f64::from(trials)
    }

    #[test]
    fn xfetch_refreshes_with_the_papers_probability() {
        // P(refresh) = exp(-remaining / (delta * beta)).
        for (beta, remaining_ms) in [(1.0, 100), (1.0, 50), (2.0, 100), (0.5, 20)] {
            let expected = (-(remaining_ms as f64 / 1000.0) / (0.1 * beta)).exp();
            let got = share(beta, Duration::from_millis(remaining_ms), 40_000);
            assert!(
                (got - expected).abs() < 0.015,
                "beta {beta}, {remaining_ms} ms before expiry: {got:.4} against {expected:.4}"
            );
        }
        assert_eq!(share(1.0, Duration::from_secs(10), 10_000), 0.0, "far from expiry");
        assert_eq!(share(1.0, Duration::ZERO, 1_000), 1.0, "at expiry");
        assert_eq!(share(0.0, Duration::ZERO, 1_000), 0.0, "beta 0 never");
    }
}
