//! `loadgen bench`: the load generator itself.
//!
//! Split the way a request travels (as in oha): [`request_template`] prepares the one
//! request of the one-query form; [`client`] drives a connection in a closed or open
//! loop; [`outcome`] classifies each answer (with [`errors_key`], the fast search for
//! `"errors"` every 2xx answer goes through); [`recorder`] keeps per-thread HDR
//! histograms and counters, merged at the end, and [`timeline`] the same per second
//! of the window; [`engine`] runs threads, warm-up and
//! window and accounts for loadgen's own CPU; [`progress`] draws the live line;
//! [`report`] prints the result as text or JSON.
//!
//! What a connection sends is a [`client::Traffic`]: the one-query form's fixed
//! request, or a [`crate::workload`] mix whose answers are checked for freshness.
pub mod client;
pub mod engine;
pub mod errors_key;
pub mod outcome;
pub mod progress;
pub mod recorder;
pub mod report;
pub mod request_template;
pub mod timeline;
