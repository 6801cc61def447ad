//! Sampling the processes over the measured window: CPU time at both edges (from
//! `/proc/<pid>/stat`; a gateway's with its descendants', as a peer gateway may fork
//! workers), turned into cores and µs of CPU per client request; VmRSS
//! through warm-up and window comes from [`crate::proc_usage::sample_rss`].
//!
//! CPU per request is steadier than req/s on a shared machine: it does not move when
//! another job takes a core, only when the work per request does.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::proc_usage;

/// CPU clocks of named processes at the start of the window.
#[derive(Debug, Clone)]
pub struct CpuWatch {
    processes: Vec<(String, u32)>,
    /// Those counted with every process below them.
    trees: Vec<u32>,
    start: Vec<(Instant, Option<Duration>)>,
}

/// One process's CPU over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessCpu {
    /// `gateway`, `gateway-2`, `user-service`, `post-service`, `loadgen`, `redis`.
    pub name: String,
    /// CPU seconds (user + system) in the window.
    pub cpu_seconds: Option<f64>,
    /// cpu_seconds / wall seconds.
    pub cores: Option<f64>,
    /// µs of CPU per client request answered in the window.
    pub us_per_request: Option<f64>,
}

impl CpuWatch {
    /// Read every process's CPU clock now; those in `trees` with their descendants'.
    pub fn start(processes: Vec<(String, u32)>, trees: Vec<u32>) -> CpuWatch {
        let mut watch = CpuWatch {
            processes,
            trees,
            start: Vec::new(),
        };
        watch.start = watch
            .processes
            .iter()
            .map(|(_, pid)| (Instant::now(), watch.clock(*pid)))
            .collect();
        watch
    }

    fn clock(&self, pid: u32) -> Option<Duration> {
        if self.trees.contains(&pid) {
            proc_usage::tree_cpu_time(pid)
        } else {
            proc_usage::process_cpu_time(pid)
        }
    }

    /// Read them again; `requests` client requests were answered in between.
    pub fn stop(&self, requests: Option<f64>) -> Vec<ProcessCpu> {
        self.processes
            .iter()
            .zip(&self.start)
            .map(|((name, pid), (t0, c0))| {
                let (t1, c1) = (Instant::now(), self.clock(*pid));
                let wall = (t1 - *t0).as_secs_f64();
                let cpu = match (c0, c1) {
                    (Some(a), Some(b)) => Some(b.saturating_sub(*a).as_secs_f64()),
                    _ => None,
                };
                ProcessCpu::new(name, cpu, wall, requests)
            })
            .collect()
    }
}

impl ProcessCpu {
    /// Figures from CPU seconds over `wall` seconds with `requests` answered.
    pub fn new(
        name: &str,
        cpu_seconds: Option<f64>,
        wall: f64,
        requests: Option<f64>,
    ) -> ProcessCpu {
        ProcessCpu {
            name: name.to_string(),
            cpu_seconds,
            cores: cpu_seconds.filter(|_| wall > 0.0).map(|c| c / wall),
            us_per_request: match (cpu_seconds, requests) {
                (Some(c), Some(n)) if n > 0.0 => Some(c * 1e6 / n),
                _ => None,
            },
        }
    }
}

/// The figures of the processes whose name starts with `prefix`, summed (all gateway
/// instances as one); `None` when none has them.
pub fn summed(
    all: &[ProcessCpu],
    prefix: &str,
    requests: Option<f64>,
    wall: f64,
) -> Option<ProcessCpu> {
    let matching: Vec<&ProcessCpu> = all.iter().filter(|p| p.name.starts_with(prefix)).collect();
    if matching.is_empty() {
        return None;
    }
    let cpu: Option<f64> = matching.iter().map(|p| p.cpu_seconds).sum();
    Some(ProcessCpu::new(prefix, cpu, wall, requests))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_per_request_and_cores() {
        let p = ProcessCpu::new("gateway", Some(2.0), 10.0, Some(10_000.0));
        assert_eq!(p.cores, Some(0.2));
        assert_eq!(p.us_per_request, Some(200.0));
        let none = ProcessCpu::new("x", None, 10.0, Some(1.0));
        assert_eq!((none.cores, none.us_per_request), (None, None));
        let all = [
            ProcessCpu::new("gateway", Some(1.0), 10.0, None),
            ProcessCpu::new("gateway-2", Some(3.0), 10.0, None),
            ProcessCpu::new("user-service", Some(1.0), 10.0, None),
        ];
        let g = summed(&all, "gateway", Some(4000.0), 10.0).unwrap();
        assert_eq!(
            (g.cpu_seconds, g.cores, g.us_per_request),
            (Some(4.0), Some(0.4), Some(1000.0))
        );
        assert!(summed(&all, "post", None, 10.0).is_none());
        let watch = CpuWatch::start(vec![("self".into(), std::process::id())], vec![]);
        let got = watch.stop(Some(1.0));
        assert_eq!(got[0].name, "self");
        assert!(got[0].cpu_seconds.is_some());
    }
}
