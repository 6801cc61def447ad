//! `second-hit`: admission on the second sighting.
//!
//! A key is stored only if it already missed once within `window`, so
//! values asked for once ("one-hit wonders") never take room from values
//! asked for again. It is the admission half of the classic filters in
//! front of an LRU: the "2Q"/"second-hit caching" idea (Johnson and Shasha,
//! VLDB 1994; Maggs and Sitaraman, "Algorithmic nuggets in content
//! delivery", SIGCOMM CCR 2015, describe Akamai's cache-on-second-hit rule).
//!
//! **Trade-off.** Every key pays one extra miss before it is kept, so a
//! small working set warms up twice as slowly and a key space that fits in
//! the cache only loses. It wins when the key space is much larger than the
//! cache and popularity is skewed: the one-off keys of the long tail never
//! evict the head. moka's TinyLFU (`--cache-eviction tinylfu`) does the same
//! job with a frequency sketch at eviction time instead of at admission.
//!
//! **Cost.** It remembers up to `capacity` first sightings (a moka cache
//! bounded by entries, expiring after `window`): one lookup and one insert
//! or remove per miss, nothing on a hit. Decisions: `admitted` on the second
//! sighting, `refused` on the first.

use std::time::Duration;

use super::{LifetimeUse, Param, Params, Registered};
use crate::key::{CacheKey, PrehashedKeys};
use crate::policy::Fetched;
use crate::strategy::{Admission, Lifetime, Strategy, StrategyContext};

/// Admission on the second sighting (see the module documentation).
///
/// ```
/// use std::time::Duration;
/// use cache_core::{Cache, SecondHitAdmission};
///
/// let cache: Cache<String> = Cache::builder()
///     .ttl(Duration::from_secs(60))
///     .strategy(SecondHitAdmission::new(100_000, Duration::from_secs(300)))
///     .build();
/// # drop(cache);
/// ```
pub struct SecondHitAdmission {
    seen: moka::sync::Cache<CacheKey, (), PrehashedKeys>,
}

impl SecondHitAdmission {
    /// Remembers up to `capacity` first sightings for `window` each.
    pub fn new(capacity: u64, window: Duration) -> Self {
        Self {
            seen: moka::sync::Cache::builder()
                .max_capacity(capacity)
                .time_to_live(window.min(Duration::from_secs(365 * 24 * 3600)))
                .build_with_hasher(PrehashedKeys),
        }
    }
}

impl Registered for SecondHitAdmission {
    const NAME: &'static str = "second-hit";
    const SUMMARY: &'static str =
        "store a key only on its second miss within a window (one-hit wonders are never kept)";
    const PARAMS: &'static [Param] = &[
        Param {
            name: "capacity",
            default: "100000",
            help: "first sightings remembered",
        },
        Param {
            name: "window",
            default: "300s",
            help: "how long a first sighting is remembered",
        },
    ];
    const LIFETIME: LifetimeUse = LifetimeUse::Admits;

    fn from_params(params: &Params<'_>) -> Result<Self, String> {
        Ok(Self::new(params.count("capacity")?, params.duration("window")?))
    }
}

impl<V> Strategy<V> for SecondHitAdmission {
    fn admit(
        &self,
        context: &StrategyContext<'_>,
        _fetched: &Fetched<V>,
        _lifetime: &mut Lifetime,
    ) -> Admission {
        if self.seen.remove(&context.key).is_some() {
            Admission::Store
        } else {
            self.seen.insert(context.key, ());
            Admission::Refuse
        }
    }
}
