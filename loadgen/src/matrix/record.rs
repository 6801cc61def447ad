//! `runs/r<round>-<config>.json`: everything recorded about one measured run, for the
//! reader who wants more than the summary (ports, PIDs, command lines, every metric's
//! difference, the bench report with the workload's figures, per-process CPU, the
//! profile and its coverage).

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::Serialize;

use super::profile::ProfileFigures;
use super::query::QuerySpec;
use super::sampling::ProcessCpu;
use super::summary::InstanceFigures;
use crate::bench::report::BenchReport;

/// One measured run.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    pub round: u32,
    pub config: String,
    pub services: Vec<ServiceRecord>,
    /// The one query, when the configuration sends one (else the bench report's
    /// `workload` and the manifest's experiment file say what was sent).
    pub query: Option<QueryRecord>,
    pub bench: BenchReport,
    /// Per-service metric differences over the measured window.
    pub metrics_delta: BTreeMap<String, BTreeMap<String, f64>>,
    /// Summed over the gateway instances.
    pub gateway_cpu_cores: Option<f64>,
    /// CPU of every process over the window: cores, and µs per client request.
    pub cpu: Vec<ProcessCpu>,
    /// VmHWM at the end of the window (the largest instance's), profiler included.
    pub gateway_peak_rss_bytes: Option<u64>,
    /// VmRSS before the load, sampled peak and at the window's end (largest instance).
    pub rss_start_mib: Option<f64>,
    pub rss_peak_mib: Option<f64>,
    pub rss_end_mib: Option<f64>,
    pub rss_warmup_peak_mib: Option<f64>,
    /// VmRSS readings taken per instance.
    pub rss_samples: Vec<usize>,
    /// Per gateway instance: requests, cache counters, CPU, RSS.
    pub gateways: Vec<InstanceFigures>,
    /// The configuration's redis-server, if it has one.
    pub redis: Option<RedisRecord>,
    /// "collected", or why there is no profile.
    pub profile: String,
    /// How the profile was taken and how much of the CPU it holds.
    pub profile_figures: Option<ProfileFigures>,
    pub answer_checked_before: bool,
    pub answer_checked_after: bool,
    /// The checks that found the answer different, when the configuration declares it
    /// expected (`expected_difference`): when, and the first difference.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub answer_differences: Vec<String>,
}

/// The query a run was measured with (the document abridged).
#[derive(Debug, Clone, Serialize)]
pub struct QueryRecord {
    /// The configuration's own query rather than the top-level one.
    pub own: bool,
    pub path: String,
    pub document_chars: usize,
    /// The first 200 characters of the document.
    pub document_start: String,
    pub variables: Option<serde_json::Value>,
    pub unique_literals: bool,
}

impl QueryRecord {
    pub fn of(q: &QuerySpec, own: bool) -> QueryRecord {
        QueryRecord {
            own,
            path: q.path.clone(),
            document_chars: q.document.chars().count(),
            document_start: q.document.chars().take(200).collect(),
            variables: q.variables.clone(),
            unique_literals: q.unique_literals,
        }
    }
}

/// What the runner saw of a configuration's redis-server.
#[derive(Debug, Clone, Serialize)]
pub struct RedisRecord {
    pub url: String,
    /// INFO `total_commands_processed` at the window's start and end.
    pub commands_processed_before: Option<u64>,
    pub commands_processed_after: Option<u64>,
    /// Commands in the window, the runner's own INFO subtracted.
    pub commands_in_window: Option<f64>,
    /// A cluster's keys per master (`DBSIZE` of each, in node order) at the window's end.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keys_per_master: Vec<u64>,
}

/// One process of the run.
#[derive(Debug, Clone, Serialize)]
pub struct ServiceRecord {
    pub name: String,
    pub pid: u32,
    pub addr: SocketAddr,
    pub command_line: Vec<String>,
    pub healthy_after_s: f64,
    pub stopped: String,
}
