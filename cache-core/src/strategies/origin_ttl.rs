//! `origin-ttl`: the entry's lifetime comes from the origin's `Cache-Control`.
//!
//! As Apollo Router's entity cache, Grafbase and Cosmo do for subgraphs:
//! the subgraph declares how long its answer may be kept, and the gateway's
//! policy TTL becomes the fallback for answers that declare nothing.
//! Directives (RFC 9111 §5.2.2), as the fetch passed them
//! ([`Fetched::cache_control`]):
//!
//! | directive | what is stored | decision |
//! |---|---|---|
//! | `no-store` | nothing | `no_store` |
//! | `no-cache` | nothing (the cache cannot revalidate) | `no_cache` |
//! | `private`, key shared by callers | nothing: never shared across users | `private` |
//! | `private`, key names the caller | `max-age` (a private cache ignores `s-maxage`) | `private_per_caller` |
//! | `s-maxage=N` | fresh N s (a shared cache prefers it to `max-age`) | `s_maxage` |
//! | `max-age=N` | fresh N s (`0`: nothing, counted `refused`) | `max_age` |
//! | `stale-while-revalidate=N` | stale window N s, with either of the above | |
//! | none of these, or no header | the policy's ttl and stale | `no_header` / `no_max_age` |
//!
//! A key "names the caller" when the fetch says so
//! ([`Fetched::keyed_by_caller`]): the gateway does when the field's key
//! includes the request's `authorization`.
//!
//! **At `ttl = 0`** the fallback keeps nothing: only what the origin says may
//! be kept is stored, for as long as it says (the natural way to run it).
//! The cache reads and writes the store at `ttl = 0` for a namespace with
//! strategies, so this works there as at any ttl.
//!
//! **Trade-off.** Each field lives as long as its owner says: long-lived
//! data (posts, 60 s) gets more hits than one global TTL would give it, and
//! volatile or per-user data is kept short or not at all, which a global
//! TTL cannot express without a policy per field. It trusts the origin: a
//! subgraph that says `max-age=86400` gets day-old answers served (the
//! `max` parameter caps that), and one that sends no header gets the
//! fallback.
//!
//! **Cost.** On a miss, a few comparisons of directives parsed once by the
//! fetch; nothing on a hit.

use std::time::Duration;

use super::{LifetimeUse, Param, Params, Registered};
use crate::policy::Fetched;
use crate::strategy::{Admission, Lifetime, Strategy, StrategyContext};

/// Lifetimes from the origin's `Cache-Control` (see the module
/// documentation).
pub struct OriginTtl {
    max: Duration,
}

impl OriginTtl {
    /// Honours the origin's directives, with fresh lifetimes capped at
    /// `max`.
    pub fn new(max: Duration) -> Self {
        Self { max }
    }
}

impl Registered for OriginTtl {
    const NAME: &'static str = "origin-ttl";
    const SUMMARY: &'static str =
        "take each entry's ttl from the origin's Cache-Control (max-age, s-maxage, no-store, private); the policy's ttl is the fallback";
    const PARAMS: &'static [Param] = &[Param {
        name: "max",
        default: "1h",
        help: "longest ttl an origin may set",
    }];
    const LIFETIME: LifetimeUse = LifetimeUse::Sets;

    fn from_params(params: &Params<'_>) -> Result<Self, String> {
        Ok(Self::new(params.duration("max")?))
    }
}

impl<V> Strategy<V> for OriginTtl {
    fn admit(
        &self,
        context: &StrategyContext<'_>,
        fetched: &Fetched<V>,
        lifetime: &mut Lifetime,
    ) -> Admission {
        let Some(directives) = fetched.get_cache_control() else {
            context.count("no_header");
            return Admission::Store;
        };
        let per_caller = fetched.is_keyed_by_caller();
        let refuse = if directives.no_store {
            Some("no_store")
        } else if directives.no_cache {
            Some("no_cache")
        } else if directives.private && !per_caller {
            Some("private")
        } else {
            None
        };
        if let Some(reason) = refuse {
            context.count(reason);
            return Admission::Refuse;
        }
        let shared = !directives.private;
        let Some(fresh) = directives.freshness(shared) else {
            context.count("no_max_age");
            return Admission::Store;
        };
        context.count(if directives.private {
            "private_per_caller"
        } else if directives.s_maxage.is_some() {
            "s_maxage"
        } else {
            "max_age"
        });
        if fresh.is_zero() {
            return Admission::Refuse;
        }
        lifetime.ttl = fresh.min(self.max);
        if let Some(stale) = directives.stale_while_revalidate {
            lifetime.stale = stale.min(self.max);
        }
        Admission::Store
    }
}
