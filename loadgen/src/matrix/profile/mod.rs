//! Profiles of the gateway during the measured window, and how much of its CPU they hold.
//!
//! Two profilers: [`perf`] (`perf record -e cpu-clock --call-graph dwarf` on the PID:
//! the whole process, kernel and libc included) where perf is installed and allowed,
//! and the gateway's own [`endpoint`] (pprof in-process, which loses the samples taken
//! in libc and the kernel) elsewhere. [`flamegraph`] merges and renders the stacks
//! either one gives, and [`differential`] draws a configuration's against its
//! baseline's, per request. Coverage is samples against CPU seconds × frequency, over the span
//! the profiler sampled.
pub mod differential;
pub mod endpoint;
pub mod flamegraph;
pub mod perf;

use serde::{Deserialize, Serialize};

/// What a profiler gave for one measured window.
#[derive(Debug, Clone, PartialEq)]
pub enum ProfileOutcome {
    /// Collapsed stacks, as text.
    Stacks(String),
    /// Why there is no profile.
    Unavailable(String),
}

/// How a round's profile was taken and how complete it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileFigures {
    /// `perf` or `endpoint`.
    pub tool: String,
    pub hz: u32,
    /// Samples in the profile.
    pub samples: u64,
    /// The profiled process's CPU seconds over the span sampled.
    pub cpu_seconds: Option<f64>,
    /// samples / (cpu_seconds × hz): the share of the CPU time the flamegraph holds.
    pub coverage: Option<f64>,
}

impl ProfileFigures {
    pub fn new(tool: &str, hz: u32, samples: u64, cpu_seconds: Option<f64>) -> ProfileFigures {
        ProfileFigures {
            tool: tool.to_string(),
            hz,
            samples,
            cpu_seconds,
            coverage: cpu_seconds
                .filter(|c| *c > 0.0)
                .map(|c| samples as f64 / (c * f64::from(hz))),
        }
    }
}
