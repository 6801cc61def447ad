//! What a person reads from a run: `summary.md` ([`markdown`]) with each ratio's 95%
//! interval against the baseline ([`against_baseline`]), the bar chart of req/s
//! and p99 ([`chart`]), for workloads the trade-off of throughput against stale reads
//! ([`tradeoff`]), for open-loop sweeps the overload curve ([`overload`]), the
//! window second by second ([`timeline`]), and for configurations with a Redis its
//! round trips per request beside the network's RTT ([`round_trips`]), and for
//! several gateways each node's own figures ([`per_gateway`]), what the caches held
//! and shared across operations ([`cache_memory`]); the pages that hold
//! them all, for a browser ([`html`]).
//!
//! The charts share [`svg`] (escaping, palette, number formats, text widths),
//! [`scale`] (linear, and log with zero drawn apart), [`frame`] (axes and grid) and
//! [`labels`] (labels placed so that none overlaps another).
pub mod against_baseline;
pub mod cache_memory;
pub mod chart;
pub mod declared_differences;
pub mod edge;
pub mod frame;
pub mod html;
pub mod labels;
pub mod markdown;
pub mod overload;
pub mod peer_cache;
pub mod per_gateway;
pub mod requests_sent;
pub mod round_trips;
pub mod scale;
pub mod svg;
pub mod timeline;
pub mod tradeoff;
