//! Behaviour tests of cache-core, through its public interface only.
//! Each module is named after what its tests prove.

mod batch;
mod cancel;
mod dedupe;
mod errors;
mod guide;
mod invalidate;
mod keys;
mod stale;
mod stats;
mod storage;
mod strategy;
mod support;
mod zero_ttl;
